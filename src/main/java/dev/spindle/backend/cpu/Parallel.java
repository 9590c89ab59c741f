package dev.spindle.backend.cpu;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * The CPU backend's workers: one thread per core (the caller is one of them).
 * A decode step issues hundreds of short parallel loops, so workers spin briefly
 * for the next loop before parking; a fork/join pool's wake-up latency would cost
 * a fifth of a small matmul. Work is split over output elements only, never over a
 * reduction, so results do not depend on the split.
 */
public final class Parallel implements AutoCloseable {
    private static final long SPIN_NANOS = 200_000;

    private final int threads;
    private final Thread[] workers;
    private final AtomicReference<Job> current = new AtomicReference<>();
    private volatile long generation;
    private volatile boolean closed;

    public Parallel(int threads) {
        this.threads = Math.max(1, threads);
        this.workers = new Thread[this.threads - 1];
        for (int i = 0; i < workers.length; i++) {
            workers[i] = Thread.ofPlatform().daemon().name("spindle-cpu-" + (i + 1)).start(this::workerLoop);
        }
    }

    public int threads() {
        return threads;
    }

    @FunctionalInterface
    public interface RangeBody {
        void run(int start, int end);
    }

    /** One parallel loop: chunks handed out by an atomic counter. */
    private static final class Job {
        final RangeBody body;
        final int n;
        final int per;
        final int chunks;
        final AtomicInteger next = new AtomicInteger();
        final AtomicInteger done = new AtomicInteger();
        volatile Throwable error;

        Job(RangeBody body, int n, int per, int chunks) {
            this.body = body;
            this.n = n;
            this.per = per;
            this.chunks = chunks;
        }

        void work() {
            int c;
            while ((c = next.getAndIncrement()) < chunks) {
                try {
                    int s = c * per;
                    body.run(s, Math.min(n, s + per));
                } catch (Throwable t) {
                    error = t;
                } finally {
                    done.incrementAndGet();
                }
            }
        }
    }

    /** Body over [0, n) in about {@code threads * 4} contiguous chunks of at least {@code grain}. */
    public void forRange(int n, int grain, RangeBody body) {
        int chunks = Math.max(1, Math.min(threads * 4, n / Math.max(1, grain)));
        if (chunks == 1 || threads == 1) {
            body.run(0, n);
            return;
        }
        int per = (n + chunks - 1) / chunks;
        chunks = (n + per - 1) / per;
        Job job = new Job(body, n, per, chunks);
        current.set(job);
        generation++;
        for (Thread w : workers) {
            LockSupport.unpark(w);
        }
        job.work();
        while (job.done.get() < job.chunks) {
            Thread.onSpinWait();
        }
        current.set(null);
        if (job.error != null) {
            throw job.error instanceof RuntimeException r ? r : new RuntimeException(job.error);
        }
    }

    private void workerLoop() {
        long seen = 0;
        while (!closed) {
            long g = generation;
            if (g != seen) {
                seen = g;
                Job job = current.get();
                if (job != null) {
                    job.work();
                }
                continue;
            }
            long spinUntil = System.nanoTime() + SPIN_NANOS;
            while (generation == seen && !closed && System.nanoTime() < spinUntil) {
                Thread.onSpinWait();
            }
            if (generation == seen && !closed) {
                LockSupport.parkNanos(this, 1_000_000);
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        for (Thread w : workers) {
            LockSupport.unpark(w);
        }
    }
}

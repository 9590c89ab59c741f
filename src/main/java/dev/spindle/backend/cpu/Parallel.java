package dev.spindle.backend.cpu;

import java.util.concurrent.ForkJoinPool;
import java.util.stream.IntStream;

/**
 * The CPU backend's worker pool: one thread per core. Work is split over output
 * elements only, never over a reduction, so results do not depend on the split.
 */
public final class Parallel {
    private final ForkJoinPool pool;
    private final int threads;

    public Parallel(int threads) {
        this.threads = Math.max(1, threads);
        this.pool = new ForkJoinPool(this.threads);
    }

    public int threads() {
        return threads;
    }

    /** Body over [0, n) in about {@code threads * 4} contiguous chunks of at least {@code grain}. */
    public void forRange(int n, int grain, RangeBody body) {
        int chunks = Math.max(1, Math.min(threads * 4, n / Math.max(1, grain)));
        if (chunks == 1 || threads == 1) {
            body.run(0, n);
            return;
        }
        int per = (n + chunks - 1) / chunks;
        pool.submit(() -> IntStream.range(0, chunks).parallel().forEach(c -> {
            int s = c * per;
            int e = Math.min(n, s + per);
            if (s < e) {
                body.run(s, e);
            }
        })).join();
    }

    @FunctionalInterface
    public interface RangeBody {
        void run(int start, int end);
    }
}

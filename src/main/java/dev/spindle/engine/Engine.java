package dev.spindle.engine;

import dev.spindle.backend.ForwardPass;
import dev.spindle.engine.sched.EngineCore;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The engine thread: it alone owns the scheduler, the KV pool and the backend. Other
 * threads talk to it through a command queue ({@link #submit}, {@link #cancel}); tokens
 * leave through each request's {@link TokenSink}. Between steps it applies commands;
 * when idle it sleeps on the queue.
 */
public final class Engine implements AutoCloseable {
    private final EngineCore core;
    private final LinkedBlockingQueue<Runnable> commands = new LinkedBlockingQueue<>();
    private final AtomicLong ids = new AtomicLong();
    private final int maxWaiting;
    private final AtomicInteger waiting = new AtomicInteger(); // submitted, not yet in the running batch
    private final Set<Long> waitingIds = new HashSet<>();      // engine thread only
    private final Thread thread;
    private volatile EngineStats stats;
    private volatile boolean closed;

    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds) {
        this(model, maxBatchedTokens, maxSequences, eosIds, Integer.MAX_VALUE);
    }

    /** @param maxWaiting requests waiting to start at most; {@link #submit} refuses more with {@link EngineBusyException} */
    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, int maxWaiting) {
        if (maxWaiting < 0) {
            throw new IllegalArgumentException("the waiting bound must be >= 0, got " + maxWaiting);
        }
        this.maxWaiting = maxWaiting;
        this.core = new EngineCore(model, maxBatchedTokens, maxSequences, eosIds);
        this.stats = core.stats();
        this.thread = Thread.ofPlatform().name("spindle-engine").daemon().start(this::loop);
    }

    /**
     * Queues a request; returns its id. Errors that make it impossible (too long for the
     * context or the KV pool, bad token ids) reach the sink's onError.
     *
     * @throws EngineBusyException when the waiting bound is reached (checked and counted atomically)
     */
    public long submit(int[] prompt, SamplingParams params, TokenSink sink) {
        int w;
        do {
            w = waiting.get();
            if (w >= maxWaiting) {
                throw new EngineBusyException(w);
            }
        } while (!waiting.compareAndSet(w, w + 1));
        long id = ids.incrementAndGet();
        commands.add(() -> {
            try {
                core.add(id, prompt, params, sink);
                waitingIds.add(id);
            } catch (RuntimeException e) { // refused (IllegalArgumentException) or broken: the place is given back either way
                waiting.decrementAndGet();
                sink.onError(e);
            }
        });
        return id;
    }

    /** The waiting bound: requests submitted and not yet running at most. */
    public int maxWaiting() {
        return maxWaiting;
    }

    /** Requests submitted that have not yet entered the running batch (exact, not a step's snapshot). */
    public int waiting() {
        return waiting.get();
    }

    /** Engine thread: releases the waiting places of requests that started, finished or were cancelled. */
    private void releaseStarted() {
        for (var it = waitingIds.iterator(); it.hasNext(); ) {
            if (!core.waitingToStart(it.next())) {
                it.remove();
                waiting.decrementAndGet();
            }
        }
    }

    /** Refuses (IllegalArgumentException) a request that can never run: callers check before streaming begins. */
    public void validate(int[] prompt, SamplingParams params) {
        core.validate(prompt, params);
    }

    /** Stops a request (client gone, stop string found); its blocks are freed before the next step. */
    public void cancel(long id) {
        commands.add(() -> core.cancel(id));
    }

    public EngineStats stats() {
        return stats;
    }

    private void loop() {
        while (!closed) {
            try {
                Runnable cmd = core.idle() ? commands.poll(100, TimeUnit.MILLISECONDS) : commands.poll();
                while (cmd != null) {
                    cmd.run();
                    cmd = commands.poll();
                }
                if (!core.idle()) {
                    core.step();
                }
                releaseStarted();
                stats = core.stats();
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                System.err.println("spindle-engine: step failed: " + e);
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        thread.interrupt();
    }
}

package dev.spindle.engine;

import dev.spindle.engine.sched.EngineCore;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;

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
    private final int maxSequences;
    private final AtomicInteger waiting = new AtomicInteger(); // submitted, not yet in the running batch
    private volatile int running;                               // in the running batch after the last step
    private final Set<Long> waitingIds = new HashSet<>();      // engine thread only
    private final Thread thread;
    private final Speculation speculation;
    private volatile EngineStats stats;
    private volatile boolean closed;
    private volatile String lastFailure;
    private volatile int failures; // steps in a row that failed

    /** Steps failing in a row after which the engine reports itself unhealthy (readiness goes down). */
    public static final int UNHEALTHY_AFTER = 3;

    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds) {
        this(model, maxBatchedTokens, maxSequences, eosIds, Integer.MAX_VALUE, Speculation.NONE);
    }

    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, int maxWaiting) {
        this(model, maxBatchedTokens, maxSequences, eosIds, maxWaiting, Speculation.NONE);
    }

    /**
     * @param maxWaiting  requests waiting to start at most; {@link #submit} refuses more with {@link EngineBusyException}
     * @param speculation speculative decoding (its proposer is closed with the engine)
     */
    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, int maxWaiting,
                  Speculation speculation) {
        this(model, maxBatchedTokens, maxSequences, eosIds, maxWaiting, speculation, false);
    }

    /**
     * @param asyncScheduling start each plain decode step before the previous step's tokens reach the host, where the
     *                        backend can ({@link ForwardPass#runsAhead}; {@link EngineCore})
     */
    public Engine(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, int maxWaiting,
                  Speculation speculation, boolean asyncScheduling) {
        if (maxWaiting < 0) {
            throw new IllegalArgumentException("the waiting bound must be >= 0, got " + maxWaiting);
        }
        this.maxWaiting = maxWaiting;
        this.maxSequences = maxSequences;
        this.speculation = speculation;
        this.core = new EngineCore(model, maxBatchedTokens, maxSequences, eosIds, speculation, asyncScheduling);
        this.stats = core.stats();
        this.thread = Thread.ofPlatform().name("spindle-engine").daemon().start(this::loop);
    }

    /**
     * Queues a request; returns its id. Errors that make it impossible (too long for the
     * context or the KV pool, bad token ids) reach the sink's onError.
     *
     * @throws EngineBusyException when the waiting bound is reached (checked and counted atomically): a burst first
     *                             fills the batch's free slots, and only the requests beyond them count against it
     */
    public long submit(int[] prompt, SamplingParams params, TokenSink sink) {
        int w;
        do {
            w = waiting.get();
            if (w >= admissionBound()) {
                throw new EngineBusyException(Math.max(0, w - freeSlots()));
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

    /** The waiting bound: requests that must wait for a batch slot at most (those that can start at once do not count). */
    public int maxWaiting() {
        return maxWaiting;
    }

    /** Requests that can be in the engine without running at most: every batch slot free, then the waiting bound. */
    public int maxQueued() {
        return (int) Math.min(Integer.MAX_VALUE, (long) maxSequences + maxWaiting);
    }

    /** Batch slots free after the last step: requests submitted into them start at the next step. */
    private int freeSlots() {
        return Math.max(0, maxSequences - running);
    }

    /** Requests submitted and not yet running at most: the free slots, then the waiting bound. */
    private int admissionBound() {
        long bound = (long) freeSlots() + maxWaiting;
        return (int) Math.min(Integer.MAX_VALUE, bound);
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

    /**
     * False once {@link #UNHEALTHY_AFTER} steps in a row have failed (the backend is unusable: every
     * request would fail); true again after a step succeeds.
     */
    public boolean healthy() {
        return failures < UNHEALTHY_AFTER;
    }

    /** The last step failure's message, or null. */
    public String lastFailure() {
        return lastFailure;
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
                    int f = core.consecutiveFailures();
                    if (f > 0) {
                        lastFailure = "the forward pass failed " + f + " step(s) in a row";
                        pause(f);
                    }
                    failures = f;
                }
                releaseStarted();
                stats = core.stats();
                running = stats.running();
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException | Error e) {
                // a fault outside the forward pass: every request in the engine fails with it, the engine goes on
                failures++;
                lastFailure = String.valueOf(e);
                System.err.println("spindle-engine: step failed, failing every request in the engine: " + e);
                core.failAll(e);
                releaseStarted();
                stats = core.stats();
                try {
                    pause(failures);
                } catch (InterruptedException ie) {
                    return;
                }
            }
        }
    }

    /** After failed steps: wait 10 ms, doubling per failure in a row up to a second, so a broken backend is no hot loop. */
    private static void pause(int failuresInARow) throws InterruptedException {
        Thread.sleep(Math.min(1000, 10L << Math.min(failuresInARow - 1, 7)));
    }

    /** Stops the engine thread and waits for it (so that nothing runs on the backend once this returns), then closes the proposer. */
    @Override
    public void close() {
        closed = true;
        thread.interrupt();
        try {
            thread.join(60_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            System.err.println("spindle-engine: the engine thread did not stop within 60 s");
        } else if (speculation.enabled()) {
            speculation.proposer().close();
        }
    }
}

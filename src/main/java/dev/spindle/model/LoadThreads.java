package dev.spindle.model;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/** Loading work run by several platform threads at once: the caller is one of them; the first failure is rethrown. */
final class LoadThreads {
    private LoadThreads() {
    }

    /**
     * Runs {@code work} on {@code threads} threads (the caller and {@code threads - 1} named {@code name-N}) until each
     * returns; work takes its items from a shared counter and stops when one thread has failed ({@code failed}).
     *
     * @param what for the message if the caller is interrupted while waiting ("reading the weights")
     */
    static void run(int threads, String name, String what, java.util.function.Consumer<java.util.function.BooleanSupplier> work) {
        AtomicReference<RuntimeException> failure = new AtomicReference<>();
        Runnable guarded = () -> {
            try {
                work.accept(() -> failure.get() != null);
            } catch (RuntimeException e) {
                failure.compareAndSet(null, e);
            }
        };
        List<Thread> others = new ArrayList<>();
        for (int w = 1; w < Math.max(1, threads); w++) {
            others.add(Thread.ofPlatform().name(name + "-" + w).start(guarded));
        }
        guarded.run();
        for (Thread t : others) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ModelLoadException("interrupted while " + what, e);
            }
        }
        if (failure.get() != null) {
            throw failure.get();
        }
    }
}

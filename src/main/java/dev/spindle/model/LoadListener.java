package dev.spindle.model;

/** Told as each tensor becomes resident, so that a terminal can show progress. */
@FunctionalInterface
public interface LoadListener {
    LoadListener NONE = (name, done, total) -> { };

    /** @param doneBytes bytes resident so far, of {@code totalBytes} */
    void loaded(String tensor, long doneBytes, long totalBytes);
}

package dev.spindle.engine;

/** A request refused because the engine's waiting bound is reached; the caller should retry later. */
public final class EngineBusyException extends RuntimeException {
    private final int waiting;

    public EngineBusyException(int waiting) {
        super("the server is busy: " + waiting + " requests are waiting; retry shortly");
        this.waiting = waiting;
    }

    /** Requests that were waiting when this one was refused. */
    public int waiting() {
        return waiting;
    }
}

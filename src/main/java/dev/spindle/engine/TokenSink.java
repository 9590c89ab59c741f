package dev.spindle.engine;

/** Where a request's tokens go. Called on the engine thread: implementations hand off, never block. */
public interface TokenSink {
    void onToken(TokenEvent event);

    /** The request failed inside the engine; no more events follow. */
    void onError(Throwable error);
}

package dev.spindle.model;

/**
 * A model directory, config or weight file that Spindle cannot use. The message
 * always names the file, the field or tensor, and what was expected.
 */
public final class ModelLoadException extends RuntimeException {
    public ModelLoadException(String message) {
        super(message);
    }

    public ModelLoadException(String message, Throwable cause) {
        super(message, cause);
    }
}

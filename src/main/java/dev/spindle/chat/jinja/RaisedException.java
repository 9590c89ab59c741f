package dev.spindle.chat.jinja;

/** Thrown by the template itself through {@code raise_exception(message)}. */
public final class RaisedException extends TemplateException {
    public RaisedException(String message) {
        super(message);
    }
}

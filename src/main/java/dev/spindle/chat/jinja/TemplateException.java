package dev.spindle.chat.jinja;

/**
 * A template that cannot be parsed or rendered for the given input. For a template's
 * own {@code raise_exception(msg)} the message is exactly {@code msg}, as HF reports it.
 */
public class TemplateException extends RuntimeException {
    public TemplateException(String message) {
        super(message);
    }
}

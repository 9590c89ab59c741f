package dev.spindle.chat;

/** A request the chat template refuses (an HTTP 400), or a template that cannot be used. */
public final class ChatTemplateException extends RuntimeException {
    public ChatTemplateException(String message) {
        super(message);
    }
}

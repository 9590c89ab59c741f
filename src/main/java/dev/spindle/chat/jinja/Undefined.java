package dev.spindle.chat.jinja;

/**
 * Jinja's default Undefined: prints as "", is false, iterates as empty, and raises
 * when used any further (attribute, call, arithmetic), naming what was missing.
 */
public record Undefined(String hint) {
    TemplateException error() {
        return new TemplateException(hint + " is undefined");
    }
}

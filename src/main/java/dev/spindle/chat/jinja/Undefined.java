package dev.spindle.chat.jinja;

/**
 * Jinja's default Undefined: prints as "", is false, has length 0, iterates as empty,
 * equals only another Undefined, and raises {@code message} when used any further
 * (attribute, item, call, arithmetic, int/float conversion). The sandbox's answer to an
 * unsafe attribute is one too: harmless until called.
 */
public record Undefined(String message) {
    /** A missing variable or argument: "'name' is undefined". */
    static Undefined named(String name) {
        return new Undefined("'" + name + "' is undefined");
    }

    TemplateException error() {
        return new TemplateException(message);
    }
}

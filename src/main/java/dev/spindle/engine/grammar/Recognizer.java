package dev.spindle.engine.grammar;

/** A character-level recognizer of a language's prefixes: immutable, so trying a token's text is free. */
public interface Recognizer {
    /** The state after {@code text}, or null if no accepted string has this prefix. */
    Recognizer feed(String text);

    /** Whether the text so far is a complete accepted string. */
    boolean accepting();
}

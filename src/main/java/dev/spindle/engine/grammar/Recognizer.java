package dev.spindle.engine.grammar;

/**
 * A character-level recognizer of a language's prefixes. States are immutable, so trying a
 * token's text on a state costs nothing to undo, and a trie walk shares work between tokens.
 */
public interface Recognizer {
    /** The state after {@code c}, or null if no accepted string continues this way. */
    Recognizer step(char c);

    /** Whether the text so far is a complete accepted string. */
    boolean accepting();

    /**
     * True when every plain character (not {@link TokenTrie#special}) leads back to this very
     * state, as inside free text: the mask then accepts whole plain subtrees of the trie at once.
     */
    default boolean plainStable() {
        return false;
    }

    /** The state after {@code text}, or null. */
    default Recognizer feed(String text) {
        Recognizer r = this;
        for (int i = 0; i < text.length() && r != null; i++) {
            r = r.step(text.charAt(i));
        }
        return r;
    }
}

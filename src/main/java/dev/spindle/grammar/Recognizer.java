package dev.spindle.grammar;

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
     * Inside free text a state is stable: every character leads back to this very state except
     * the special characters ({@link TokenTrie#bit}) set in the returned mask, and the trie walk
     * accepts whole subtrees without those characters at once. {@link TokenTrie#NOT_STABLE} (the
     * default): any character may change the state.
     */
    default long stableExcept() {
        return TokenTrie.NOT_STABLE;
    }

    /**
     * As {@link #stableExcept}, but for the next {@link #stableBudget} plain characters only: the
     * state after k of them (k at most the budget) is {@link #skipPlain}(k), which differs from
     * this one only by a count (a string's length under maxLength). The trie walk uses it; a
     * state stable for good returns its {@link #stableExcept} and an unlimited budget (the default).
     */
    default long stableExceptWithin() {
        return stableExcept();
    }

    /** Plain characters {@link #stableExceptWithin} holds for; {@link Integer#MAX_VALUE}: no limit. */
    default int stableBudget() {
        return Integer.MAX_VALUE;
    }

    /** The state after {@code k} plain characters, k at most {@link #stableBudget}. */
    default Recognizer skipPlain(int k) {
        return this;
    }

    /** True when the next character can only be ASCII (structure, not text): the walk skips the rest. */
    default boolean asciiNext() {
        return false;
    }

    /**
     * True in free text that the grammar only watches (a lazy grammar before its trigger): the next
     * token is not masked, so that it may be drawn on the device; a token that begins the trigger
     * ends the free state, and the grammar constrains from there.
     */
    default boolean freeText() {
        return false;
    }

    /**
     * A state that allows exactly the same tokens of at most {@code longest} characters as this
     * one, and repeats more often (so its mask is cached, or stable): this one by default.
     */
    default Recognizer maskEquivalent(int longest) {
        return this;
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

package dev.spindle.grammar;

import java.util.List;

/**
 * Watches free text for tags it must never contain (the chat format's own markup, so that
 * a value cannot close its call early or swallow the next turn), and for the one
 * terminator that ends the text. A state is the longest suffix of the text that could
 * still grow into a tag; the text so far never contains a forbidden tag.
 */
public final class TagGuard {
    /** The result of a character that completed the terminator. */
    public static final TagGuard TERMINATED = new TagGuard(List.of(), null, "");

    private final List<String> forbidden;
    private final String terminator; // null: none
    private final String partial;

    private final long starts;

    private TagGuard(List<String> forbidden, String terminator, String partial) {
        this.forbidden = forbidden;
        this.terminator = terminator;
        this.partial = partial;
        long b = terminator == null ? 0 : TokenTrie.bit(terminator.charAt(0));
        for (String f : forbidden) {
            b |= TokenTrie.bit(f.charAt(0));
        }
        this.starts = b;
    }

    /**
     * @param forbidden  tags the text must not contain; each starts with a special character (see {@link TokenTrie#special})
     * @param terminator text that ends the text (checked before the forbidden tags), or null
     */
    public static TagGuard of(List<String> forbidden, String terminator) {
        for (String t : forbidden) {
            if (t.isEmpty() || !TokenTrie.special(t.charAt(0))) {
                throw new IllegalArgumentException("a guarded tag must start with a special character: " + t);
            }
        }
        if (terminator != null && !TokenTrie.special(terminator.charAt(0))) {
            throw new IllegalArgumentException("a terminator must start with a special character: " + terminator);
        }
        return new TagGuard(List.copyOf(forbidden), terminator, "");
    }

    /** The state after {@code c}: {@link #TERMINATED}, null when a forbidden tag is complete, else the next state. */
    public TagGuard step(char c) {
        if (partial.isEmpty() && (TokenTrie.bit(c) & starts) == 0) {
            return this;
        }
        String t = partial + c;
        while (!t.isEmpty()) {
            if (t.equals(terminator)) {
                return TERMINATED;
            }
            if (forbidden.contains(t)) {
                return null;
            }
            if (couldGrow(t)) {
                return t.equals(partial) ? this : new TagGuard(forbidden, terminator, t);
            }
            t = t.substring(1);
        }
        return partial.isEmpty() ? this : new TagGuard(forbidden, terminator, "");
    }

    private boolean couldGrow(String t) {
        if (terminator != null && terminator.startsWith(t)) {
            return true;
        }
        for (String f : forbidden) {
            if (f.startsWith(t)) {
                return true;
            }
        }
        return false;
    }

    /** The first characters of the tags and the terminator, as {@link TokenTrie#bit}s: only they can start a match. */
    public long starts() {
        return starts;
    }

    /** Whether no tag is partly matched (plain characters then keep the state). */
    public boolean clear() {
        return partial.isEmpty();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TagGuard g && g.partial.equals(partial) && g.forbidden.equals(forbidden) && java.util.Objects.equals(g.terminator, terminator);
    }

    @Override
    public int hashCode() {
        return partial.hashCode() * 31 + forbidden.hashCode();
    }
}

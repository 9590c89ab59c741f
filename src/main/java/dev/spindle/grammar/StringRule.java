package dev.spindle.grammar;

/**
 * What a string value must be beyond being a string: an automaton over its decoded code points
 * (pattern, format, enum or const, or several of them intersected; null: any text) and bounds on
 * its length in code points. A recognizer's string holds (automaton state, length so far) and
 * takes a character only where some completion still satisfies both (no dead ends).
 */
final class StringRule {
    /** Lengths at which minLength is decided exactly together with an automaton: past it the schema is refused. */
    static final int MAX_EXACT_LENGTH = 1 << 14;

    final Dfa dfa;
    final int minLength, maxLength; // code points; maxLength Integer.MAX_VALUE: unbounded
    private final boolean[][] exact;  // [state][d]: acceptance reachable in exactly d code points, d <= minLength + states
    private volatile StringRule unbounded; // this rule without maxLength (see JsonRecognizer.maskEquivalent)

    StringRule(Dfa dfa, int minLength, int maxLength) {
        this.dfa = dfa;
        this.minLength = minLength;
        this.maxLength = maxLength;
        if (dfa != null && minLength > 0 && !dfa.empty()) {
            if ((long) minLength + dfa.states() > MAX_EXACT_LENGTH) {
                throw new IllegalArgumentException("minLength " + minLength + " together with a pattern or format is too large for constrained decoding");
            }
            this.exact = dfa.exactLengths(minLength + dfa.states());
        } else {
            this.exact = null;
        }
    }

    /** This rule without its maxLength (one instance per rule, so that states built on it compare equal). */
    StringRule unbounded() {
        StringRule u = unbounded;
        if (u == null) {
            synchronized (this) {
                u = unbounded;
                if (u == null) {
                    unbounded = u = new StringRule(dfa, minLength, Integer.MAX_VALUE);
                }
            }
        }
        return u;
    }

    /**
     * Whether, {@code count} code points in, no text of at most {@code longest} characters can come
     * near maxLength: every such text is then taken exactly as under {@link #unbounded} (each
     * character adds at most one code point, and an accepting completion needs fewer code points
     * than the automaton has states, plus its exact-length window).
     */
    boolean farFromMax(int count, int longest) {
        int states = dfa == null ? 1 : dfa.states();
        return maxLength != Integer.MAX_VALUE && (long) maxLength - count > (long) longest + 2L * states + 1 && (long) maxLength - minLength > states;
    }

    /**
     * Plain characters that may follow at (q, count), count at least minLength, when q loops on them:
     * each keeps q and adds one code point, and stays viable while an accepting completion still fits.
     */
    int budget(int q, int count) {
        int d = dfa == null ? 0 : dfa.distance(q);
        return (int) Math.max(0, (long) maxLength - count - d);
    }

    static StringRule and(StringRule a, StringRule b) {
        if (a == null) {
            return b;
        }
        if (b == null) {
            return a;
        }
        Dfa d = a.dfa == null ? b.dfa : b.dfa == null ? a.dfa : a.dfa.and(b.dfa);
        return new StringRule(d, Math.max(a.minLength, b.minLength), Math.min(a.maxLength, b.maxLength));
    }

    int start() {
        return dfa == null ? 0 : dfa.start();
    }

    /** The length to keep after {@code count} code points: past minLength an unbounded string need not count. */
    int counted(int count) {
        return maxLength == Integer.MAX_VALUE ? Math.min(count, minLength) : count;
    }

    /** The automaton state after {@code cp}, or -1. */
    int step(int q, int cp) {
        return dfa == null ? 0 : dfa.step(q, cp);
    }

    /** Whether some string continuing from (q, count) is accepted. */
    boolean viable(int q, int count) {
        if (q < 0 || count > maxLength) {
            return false;
        }
        long lo = Math.max(0, minLength - count), hi = (long) maxLength - count;
        if (dfa == null) {
            return lo <= hi;
        }
        if (exact == null) {
            return dfa.distance(q) <= hi;
        }
        long top = Math.min(hi, lo + dfa.states());
        for (long d = lo; d <= top; d++) { // a longer accepted path has a cycle to drop and stays >= lo (see exact)
            if (exact[q][(int) d]) {
                return true;
            }
        }
        return false;
    }

    /** Whether the string may end here. */
    boolean complete(int q, int count) {
        return count >= minLength && count <= maxLength && (dfa == null || dfa.accepting(q));
    }

    /** Whether some code point in [lo, hi] (none a surrogate) leads on from (q, count) to a viable state. */
    boolean anyIn(int q, int count, int lo, int hi) {
        int n = counted(count + 1);
        if (dfa == null) {
            return viable(0, n);
        }
        return dfa.anyStep(q, lo, hi, t -> viable(t, n));
    }

    /**
     * Whether a UTF-16 unit in [lo, hi] can come next: after a pending high surrogate, a low one
     * completing a viable code point; otherwise a viable BMP character or a high surrogate some
     * low one completes.
     */
    boolean anyUnit(int q, int count, char high, int lo, int hi) {
        if (high != 0) {
            int a = Math.max(lo, 0xDC00), b = Math.min(hi, 0xDFFF);
            return a <= b && anyIn(q, count, Character.toCodePoint(high, (char) a), Character.toCodePoint(high, (char) b));
        }
        if (lo < 0xD800 && anyIn(q, count, lo, Math.min(hi, 0xD7FF)) || hi > 0xDFFF && anyIn(q, count, Math.max(lo, 0xE000), hi)) {
            return true;
        }
        int a = Math.max(lo, 0xD800), b = Math.min(hi, 0xDBFF);
        return a <= b && anyIn(q, count, Character.toCodePoint((char) a, (char) 0xDC00), Character.toCodePoint((char) b, (char) 0xDFFF));
    }

    boolean satisfiable() {
        return (dfa == null || !dfa.empty()) && viable(start(), 0);
    }

    /** Whether the whole decoded {@code text} is accepted. */
    boolean matches(String text) {
        int q = start(), n = 0;
        for (int i = 0; i < text.length(); ) {
            int cp = text.codePointAt(i);
            i += Character.charCount(cp);
            q = step(q, cp);
            n++;
            if (q < 0) {
                return false;
            }
        }
        return complete(q, n);
    }
}

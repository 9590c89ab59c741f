package dev.spindle.grammar;

import java.util.ArrayList;
import java.util.List;

/**
 * An ECMA-262 regular expression (JSON Schema's {@code pattern} dialect, no flags) parsed into
 * a tree: character classes and ranges, escapes ({@code \d \w \s} and their negations, control,
 * hex and unicode escapes), quantifiers ({@code * + ? {m} {m,} {m,n}}, lazy forms read as greedy:
 * same language), alternation, groups (capturing, non-capturing, named) and the anchors
 * {@code ^ $}, and lookaheads right after a leading {@code ^} ({@link #parseWithLookaheads}).
 * Backreferences, other lookaround and word boundaries are refused by name: they are not regular,
 * or not without more machinery than constrained decoding needs.
 *
 * <p>Characters are Unicode code points; surrogate code points are left out of every class,
 * since a decoded JSON string holding one alone is not text.
 */
final class Regex {
    /** Expanded repetitions a pattern may hold ({@code a{1000}{1000}} would build a million states). */
    static final int MAX_EXPANSION = 4000;

    sealed interface Node {
    }

    /** One code point of {@code set} (sorted disjoint inclusive ranges lo0, hi0, lo1, hi1, ...). */
    record Chars(int[] set) implements Node {
    }

    record Seq(List<Node> parts) implements Node {
    }

    record Alt(List<Node> options) implements Node {
    }

    /** {@code max} -1: unbounded. */
    record Repeat(Node node, int min, int max) implements Node {
    }

    /** ^ (start) or $ (end) of the string. */
    record Anchor(boolean start) implements Node {
    }

    static final int MAX_CP = 0x10FFFF;
    static final int[] ALL = {0, 0xD7FF, 0xE000, MAX_CP};
    static final int[] DIGIT = {'0', '9'};
    static final int[] WORD = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
    static final int[] SPACE = {'\t', '\r', ' ', ' ', 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x202F,
            0x205F, 0x205F, 0x3000, 0x3000, 0xFEFF, 0xFEFF};
    private static final int[] LINE_TERMINATORS = {'\n', '\n', '\r', '\r', 0x2028, 0x2029};

    private final String src;
    private int pos;
    private int expansion;

    private Regex(String src) {
        this.src = src;
    }

    /**
     * A pattern as anchored lookaheads and the rest: {@code ^(?=A)(?!B)R} is R (anchored at the
     * start) among the strings beginning with a match of A and not with one of B (zod writes its
     * email pattern so). Lookaheads anywhere else are refused.
     *
     * @param main     the pattern without its leading lookaheads (search semantics, as any pattern)
     * @param positive each a prefix the string must begin with (anchored at the start)
     * @param negative each a prefix the string must not begin with
     */
    record Parsed(Node main, List<Node> positive, List<Node> negative) {
    }

    static Parsed parseWithLookaheads(String pattern) {
        Regex r = new Regex(pattern);
        List<Node> positive = new ArrayList<>(), negative = new ArrayList<>();
        if (pattern.startsWith("^(?=") || pattern.startsWith("^(?!")) {
            r.pos = 1;
            while (r.src.startsWith("(?=", r.pos) || r.src.startsWith("(?!", r.pos)) {
                boolean neg = r.src.charAt(r.pos + 2) == '!';
                r.pos += 3;
                Node inner = r.alternation();
                if (!r.eat(')')) {
                    throw r.error("unterminated lookahead");
                }
                (neg ? negative : positive).add(inner);
            }
            Node rest = r.alternation();
            if (r.pos < pattern.length()) {
                throw r.error("unbalanced ')'");
            }
            if (rest instanceof Alt) {
                throw r.error("lookahead before a top-level alternation (it would bind the first alternative only) is not supported");
            }
            return new Parsed(new Seq(List.of(new Anchor(true), rest)), positive, negative);
        }
        return new Parsed(parse(pattern), positive, negative);
    }

    /** @throws IllegalArgumentException saying what is not supported or malformed, and where */
    static Node parse(String pattern) {
        Regex r = new Regex(pattern);
        Node n = r.alternation();
        if (r.pos < pattern.length()) {
            throw r.error("unbalanced ')'");
        }
        return n;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException(what + " at offset " + pos + " of pattern " + new com.fasterxml.jackson.databind.node.TextNode(src));
    }

    private boolean more() {
        return pos < src.length();
    }

    private int peek() {
        return src.codePointAt(pos);
    }

    private int next() {
        int c = src.codePointAt(pos);
        pos += Character.charCount(c);
        return c;
    }

    private boolean eat(char c) {
        if (more() && src.charAt(pos) == c) {
            pos++;
            return true;
        }
        return false;
    }

    private Node alternation() {
        List<Node> options = new ArrayList<>();
        options.add(sequence());
        while (eat('|')) {
            options.add(sequence());
        }
        return options.size() == 1 ? options.getFirst() : new Alt(options);
    }

    private Node sequence() {
        List<Node> parts = new ArrayList<>();
        while (more() && peek() != '|' && peek() != ')') {
            Node atom = atom();
            parts.add(quantified(atom));
        }
        return parts.size() == 1 ? parts.getFirst() : new Seq(parts);
    }

    private Node quantified(Node atom) {
        if (!more()) {
            return atom;
        }
        int min, max;
        int save = pos;
        switch (peek()) {
            case '*' -> { pos++; min = 0; max = -1; }
            case '+' -> { pos++; min = 1; max = -1; }
            case '?' -> { pos++; min = 0; max = 1; }
            case '{' -> {
                pos++;
                int m = number();
                if (m < 0) {
                    pos = save; // a literal '{' (Annex B)
                    return atom;
                }
                min = m;
                max = m;
                if (eat(',')) {
                    max = more() && peek() == '}' ? -1 : number();
                }
                if (!eat('}') || max >= 0 && max < min) {
                    throw error("malformed quantifier");
                }
            }
            default -> {
                return atom;
            }
        }
        eat('?'); // lazy: the same language
        if (atom instanceof Anchor) {
            throw error("quantified anchor");
        }
        expansion += Math.max(min, max < 0 ? 1 : max);
        if (expansion > MAX_EXPANSION) {
            throw error("repetition counts too large for constrained decoding");
        }
        return new Repeat(atom, min, max);
    }

    private int number() {
        int start = pos, v = 0;
        while (more() && peek() >= '0' && peek() <= '9') {
            v = Math.min(v * 10 + (next() - '0'), 1_000_000);
        }
        return pos == start ? -1 : v;
    }

    private Node atom() {
        int c = next();
        return switch (c) {
            case '^' -> new Anchor(true);
            case '$' -> new Anchor(false);
            case '.' -> new Chars(minus(ALL, LINE_TERMINATORS));
            case '(' -> group();
            case '[' -> new Chars(clean(classBody()));
            case '\\' -> escapeAtom();
            case '*', '+', '?' -> throw error("nothing to repeat");
            case ')' -> throw error("unbalanced ')'");
            default -> new Chars(clean(new int[]{c, c}));
        };
    }

    private Node group() {
        if (eat('?')) {
            if (eat(':')) {
                // non-capturing
            } else if (src.startsWith("<", pos) && !src.startsWith("<=", pos) && !src.startsWith("<!", pos)) {
                int close = src.indexOf('>', pos);
                if (close < 0) {
                    throw error("unterminated group name");
                }
                pos = close + 1;
            } else {
                throw error("lookaround assertions are not supported");
            }
        }
        Node inner = alternation();
        if (!eat(')')) {
            throw error("unterminated group");
        }
        return inner;
    }

    private Node escapeAtom() {
        if (!more()) {
            throw error("trailing backslash");
        }
        int c = peek();
        if (c >= '1' && c <= '9' || c == 'k') {
            throw error("backreferences are not supported");
        }
        if (c == 'b' || c == 'B') {
            throw error("word boundaries are not supported");
        }
        return new Chars(clean(escapeSet(false)));
    }

    /** After a backslash: the escape's set of code points. */
    private int[] escapeSet(boolean inClass) {
        int c = next();
        return switch (c) {
            case 'd' -> DIGIT;
            case 'D' -> minus(ALL, DIGIT);
            case 'w' -> WORD;
            case 'W' -> minus(ALL, WORD);
            case 's' -> SPACE;
            case 'S' -> minus(ALL, SPACE);
            case 'b' -> single('\b'); // only inside a class: backspace
            default -> single(escapedChar(c));
        };
    }

    private static int[] single(int c) {
        return new int[]{c, c};
    }

    private int escapedChar(int c) {
        return switch (c) {
            case 't' -> '\t';
            case 'n' -> '\n';
            case 'r' -> '\r';
            case 'f' -> '\f';
            case 'v' -> 0x0B;
            case '0' -> 0;
            case 'c' -> {
                if (!more() || !Character.isLetter(peek()) || peek() > 'z') {
                    throw error("malformed control escape");
                }
                yield next() % 32;
            }
            case 'x' -> hex(2);
            case 'u' -> {
                if (eat('{')) {
                    int close = src.indexOf('}', pos);
                    if (close < 0) {
                        throw error("malformed unicode escape");
                    }
                    int v = hex(close - pos);
                    pos = close + 1;
                    if (v > MAX_CP) {
                        throw error("code point out of range");
                    }
                    yield v;
                }
                int v = hex(4);
                if (Character.isHighSurrogate((char) v) && src.startsWith("\\u", pos)) { // a pair written as two escapes
                    int save = pos;
                    pos += 2;
                    int low = hex(4);
                    if (Character.isLowSurrogate((char) low)) {
                        yield Character.toCodePoint((char) v, (char) low);
                    }
                    pos = save;
                }
                yield v;
            }
            default -> {
                if (Character.isLetterOrDigit(c)) {
                    throw error("unknown escape \\" + Character.toString(c));
                }
                yield c; // identity escape of a syntax character
            }
        };
    }

    private int hex(int digits) {
        if (digits <= 0 || pos + digits > src.length()) {
            throw error("malformed hex escape");
        }
        try {
            int v = Integer.parseInt(src.substring(pos, pos + digits), 16);
            pos += digits;
            return v;
        } catch (NumberFormatException e) {
            throw error("malformed hex escape");
        }
    }

    private int[] classBody() {
        boolean negate = eat('^');
        int[] set = new int[0];
        while (more() && peek() != ']') { // [] is empty and [^] is any character, as in ECMA-262
            int[] lo = classAtom();
            if (lo.length == 2 && lo[0] == lo[1] && src.startsWith("-", pos) && pos + 1 < src.length() && src.charAt(pos + 1) != ']') {
                pos++;
                int[] hi = classAtom();
                if (hi.length != 2 || hi[0] != hi[1] || hi[0] < lo[0]) {
                    throw error("malformed class range");
                }
                set = union(set, new int[]{lo[0], hi[0]});
            } else {
                set = union(set, lo);
            }
        }
        if (!eat(']')) {
            throw error("unterminated character class");
        }
        return negate ? minus(ALL, set) : set;
    }

    private int[] classAtom() {
        int c = next();
        if (c == '\\') {
            if (!more()) {
                throw error("trailing backslash");
            }
            return escapeSet(true);
        }
        return single(c);
    }

    /** Without surrogate code points. */
    private static int[] clean(int[] set) {
        return minus(set, new int[]{0xD800, 0xDFFF});
    }

    static int[] union(int[] a, int[] b) {
        List<int[]> ranges = new ArrayList<>();
        for (int i = 0; i < a.length; i += 2) {
            ranges.add(new int[]{a[i], a[i + 1]});
        }
        for (int i = 0; i < b.length; i += 2) {
            ranges.add(new int[]{b[i], b[i + 1]});
        }
        ranges.sort((x, y) -> Integer.compare(x[0], y[0]));
        List<Integer> out = new ArrayList<>();
        for (int[] r : ranges) {
            int n = out.size();
            if (n > 0 && r[0] <= out.get(n - 1) + 1) {
                out.set(n - 1, Math.max(out.get(n - 1), r[1]));
            } else {
                out.add(r[0]);
                out.add(r[1]);
            }
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    static int[] complement(int[] a) {
        List<Integer> out = new ArrayList<>();
        int from = 0;
        for (int i = 0; i < a.length; i += 2) {
            if (a[i] > from) {
                out.add(from);
                out.add(a[i] - 1);
            }
            from = a[i + 1] + 1;
        }
        if (from <= MAX_CP) {
            out.add(from);
            out.add(MAX_CP);
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    static int[] minus(int[] a, int[] b) {
        return complement(union(complement(a), b));
    }

    static boolean contains(int[] set, int cp) {
        for (int i = 0; i < set.length; i += 2) {
            if (cp < set[i]) {
                return false;
            }
            if (cp <= set[i + 1]) {
                return true;
            }
        }
        return false;
    }
}

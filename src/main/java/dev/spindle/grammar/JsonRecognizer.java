package dev.spindle.grammar;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Recognizes, one character at a time, the prefixes of JSON documents that a {@link Schema}
 * accepts, in a form that always ends: whitespace between tokens is nothing, one space, or
 * one newline and at most 20 spaces or tabs of indentation; numbers have at most 16 integer
 * and 16 fraction digits and a 2-digit exponent, so every number it admits is a finite double,
 * non-zero unless written as zero (|x| &lt; 1e115, and &gt; 1e-115 otherwise: a 3-digit exponent let
 * a sampled 4915095129.31e350 through, which clients parse as infinity); a document may be framed by at most 4
 * whitespace characters (when the root allows it); a number with bounds or multipleOf is written
 * without exponent, so that each prefix can be decided ({@link NumberRule}). A state is a set of configurations
 * (anyOf and enums branch; usually one); a configuration is an immutable stack of frames.
 */
public final class JsonRecognizer implements Recognizer {
    static final int MAX_INT_DIGITS = 16, MAX_FRACTION_DIGITS = 16, MAX_EXPONENT_DIGITS = 2;
    static final int MAX_INDENT = 20, ROOT_SPACE = 4;
    private static final int SPACE = MAX_INDENT + 2; // whitespace state after a single space

    sealed interface Frame {
    }

    /** A value is expected; {@code ws}: the whitespace state before it. */
    record Value(Schema schema, int ws) implements Frame {
    }

    /** Inside an object. state 0: after '{'; 1: after ','; 2: key read, ':' expected; 3: after a value. */
    record Obj(Schema schema, int state, Set<String> seen, String key, int ws) implements Frame {
    }

    /**
     * Inside an array. state 0: after '['; 1: after a value; 2: after ','. count: items so far, kept
     * only as far as it matters (see {@link #counted}), so that the states of long arrays repeat.
     */
    record Arr(Schema schema, int state, int count, int ws) implements Frame {
    }

    /**
     * Inside a string; key strings collect their text (to check property names); escape: 0 none,
     * 1 after '\', 2..5 hex digits; check: the value's {@link StringRule} state, or null for free text.
     */
    record Str(boolean key, String text, int escape, TagGuard guard, StrCheck check) implements Frame {
    }

    /**
     * A string's progress under its rule: automaton state q, code points so far (see
     * {@link StringRule#counted}), the hex digits of a unicode escape so far, a high surrogate
     * waiting for its low one (0: none).
     */
    record StrCheck(StringRule rule, int q, int count, int hex, char high) {
    }

    /**
     * Inside a number: state per the JSON number grammar (accepting: 2, 3, 5, 8), digits in the
     * current part; under a rule (else null) its text so far.
     */
    record Num(boolean integer, int state, int digits, NumberRule rule, String text) implements Frame {
        Num with(int state, int digits) {
            return new Num(integer, state, digits, rule, text);
        }
    }

    /** A fixed text (true, false, null, an enum or const value). */
    record Lit(String text, int pos) implements Frame {
    }

    /** The document is complete; {@code ws} whitespace characters followed it. */
    record Done(int ws) implements Frame {
    }

    /**
     * An immutable stack of frames. Its depth is bounded ({@link #MAX_DEPTH} open containers), and
     * its hash is computed once and its equality walked in a loop: states are cache keys, compared
     * at every step, and must never recurse as deep as the document.
     */
    static final class Stack {
        private final Frame top;
        private final Stack rest;
        private final int depth;
        private final int hash;

        Stack(Frame top, Stack rest) {
            this.top = top;
            this.rest = rest;
            this.depth = rest == null ? 1 : rest.depth + 1;
            this.hash = top.hashCode() * 31 + (rest == null ? 0 : rest.hash);
        }

        Frame top() {
            return top;
        }

        Stack rest() {
            return rest;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Stack other)) {
                return false;
            }
            Stack a = this, b = other;
            while (a != null && b != null) {
                if (a == b) {
                    return true;
                }
                if (a.hash != b.hash || a.depth != b.depth || !a.top.equals(b.top)) {
                    return false;
                }
                a = a.rest;
                b = b.rest;
            }
            return a == b;
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    /** Containers open at once at most: deeper nesting is refused (no schema or reply needs it, and it bounds every walk). */
    static final int MAX_DEPTH = 128;

    /**
     * @param stringGuard tags no string may contain (raw text, escapes included), or null
     * @param rootSpace   whether the document may be framed by whitespace
     */
    public record Options(TagGuard stringGuard, boolean rootSpace) {
    }

    private final Stack[] configs;
    private final Options options;
    private final long stable; // see Recognizer.stableExcept
    private final long stableWithin; // see Recognizer.stableExceptWithin, for budget plain characters
    private final int budget;

    private JsonRecognizer(Stack[] configs, Options options) {
        this.configs = configs;
        this.options = options;
        long s = 0;
        for (Stack c : configs) {
            long one = c.top() instanceof Str str && !str.key() && str.escape() == 0 && (str.guard() == null || str.guard().clear())
                    ? JsonStrings.stableExcept(str) : TokenTrie.NOT_STABLE;
            if (one >= 0) {
                s |= one;
            } else {
                s = TokenTrie.NOT_STABLE;
                break;
            }
        }
        this.stable = s;
        long w = 0;
        int b = Integer.MAX_VALUE;
        for (Stack c : configs) {
            long one = c.top() instanceof Str str && !str.key() && str.escape() == 0 && (str.guard() == null || str.guard().clear())
                    ? JsonStrings.stableExceptWithin(str) : TokenTrie.NOT_STABLE;
            if (one < 0) {
                w = TokenTrie.NOT_STABLE;
                break;
            }
            w |= one;
            b = Math.min(b, JsonStrings.budget((Str) c.top()));
        }
        this.stableWithin = w;
        this.budget = w < 0 ? Integer.MAX_VALUE : b;
    }

    @Override
    public long stableExceptWithin() {
        return stableWithin;
    }

    @Override
    public int stableBudget() {
        return budget;
    }

    @Override
    public JsonRecognizer skipPlain(int k) {
        if (k == 0 || budget == Integer.MAX_VALUE) {
            return this;
        }
        Stack[] out = configs.clone();
        for (int i = 0; i < out.length; i++) {
            Str str = (Str) out[i].top();
            StrCheck c = str.check();
            if (c != null) {
                out[i] = new Stack(new Str(false, null, 0, str.guard(), new StrCheck(c.rule(), c.q(), c.rule().counted(c.count() + k), 0, (char) 0)), out[i].rest());
            }
        }
        return new JsonRecognizer(out, options);
    }

    /** A document framed by at most 4 whitespace characters, strings unguarded (response_format). */
    public static JsonRecognizer start(Schema schema) {
        return start(schema, new Options(null, true));
    }

    public static JsonRecognizer start(Schema schema, Options options) {
        return new JsonRecognizer(new Stack[]{new Stack(new Value(schema, 0), null)}, options);
    }

    @Override
    public JsonRecognizer step(char c) {
        if (StateSets.unchanged(stable, c)) {
            return this;
        }
        Stack[] next = StateSets.next(configs, c, this::step, Stack[]::new);
        return next == null ? null : new JsonRecognizer(next, options);
    }

    @Override
    public JsonRecognizer feed(String text) {
        return (JsonRecognizer) Recognizer.super.feed(text);
    }

    /** A bounded string far from its maxLength masks as the unbounded one (whose state repeats, and is stable where its automaton loops). */
    @Override
    public JsonRecognizer maskEquivalent(int longest) {
        Stack[] out = null;
        for (int i = 0; i < configs.length; i++) {
            if (configs[i].top() instanceof Str str && !str.key() && str.escape() == 0 && str.check() != null && str.check().high() == 0
                    && str.check().rule().farFromMax(str.check().count(), longest)) {
                StrCheck k = str.check();
                StringRule u = k.rule().unbounded();
                if (out == null) {
                    out = configs.clone();
                }
                out[i] = new Stack(new Str(false, null, 0, str.guard(), new StrCheck(u, k.q(), u.counted(k.count()), 0, (char) 0)), configs[i].rest());
            }
        }
        return out == null ? this : new JsonRecognizer(out, options);
    }

    @Override
    public boolean accepting() {
        return Arrays.stream(configs).anyMatch(s -> s.top() instanceof Done || (s.rest() == null && s.top() instanceof Num n && JsonNumbers.complete(n)));
    }

    @Override
    public long stableExcept() {
        return stable;
    }

    @Override
    public boolean asciiNext() {
        for (Stack c : configs) {
            boolean ascii = switch (c.top()) {
                case Str str -> str.key() && str.escape() == 0 && JsonStrings.asciiKeys((Obj) c.rest().top());
                case Lit l -> l.text().charAt(l.pos()) < 0x80;
                default -> true;
            };
            if (!ascii) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof JsonRecognizer r && java.util.Arrays.equals(r.configs, configs) && r.options.equals(options);
    }

    @Override
    public int hashCode() {
        return java.util.Arrays.hashCode(configs);
    }

    /** The whitespace state after {@code c}, or -1 if no more whitespace may follow. */
    private int space(int ws, char c, boolean root) {
        if (root) {
            return options.rootSpace() && ws < ROOT_SPACE && (c == ' ' || c == '\n' || c == '\t' || c == '\r') ? ws + 1 : -1;
        }
        return switch (c) {
            case ' ' -> ws == 0 ? SPACE : ws >= 1 && ws <= MAX_INDENT ? ws + 1 : -1;
            case '\t' -> ws >= 1 && ws <= MAX_INDENT ? ws + 1 : -1;
            case '\n' -> ws == 0 ? 1 : -1;
            default -> -1;
        };
    }

    private static boolean ws(char c) {
        return c == ' ' || c == '\n' || c == '\t' || c == '\r';
    }

    /** The stack once the value on top of {@code rest} is complete. */
    static Stack completed(Stack rest) {
        return rest == null ? new Stack(new Done(0), null) : rest;
    }

    private void step(Stack s, char c, List<Stack> out) {
        switch (s.top()) {
            case Done d -> {
                int w = ws(c) ? space(d.ws(), c, true) : -1;
                if (w >= 0) {
                    out.add(new Stack(new Done(w), null));
                }
            }
            case Value v -> {
                if (ws(c)) {
                    int w = space(v.ws(), c, s.rest() == null);
                    if (w >= 0) {
                        out.add(new Stack(new Value(v.schema(), w), s.rest()));
                    }
                    return;
                }
                startValue(v.schema(), s.rest(), c, out);
            }
            case Lit l -> {
                if (l.text().charAt(l.pos()) == c) {
                    out.add(l.pos() + 1 == l.text().length() ? completed(s.rest()) : new Stack(new Lit(l.text(), l.pos() + 1), s.rest()));
                }
            }
            case Num n -> {
                Num next = JsonNumbers.step(n, c);
                if (next != null) {
                    out.add(new Stack(next, s.rest()));
                } else if (JsonNumbers.complete(n)) {
                    step(completed(s.rest()), c, out); // the character ends the number and belongs to the parent
                }
            }
            case Str str -> JsonStrings.step(str, s, c, out);
            case Obj o -> objectStep(o, s, c, out);
            case Arr a -> arrayStep(a, s, c, out);
        }
    }

    private void startValue(Schema schema, Stack rest, char c, List<Stack> out) {
        if (!schema.anyOf().isEmpty()) {
            for (Schema alt : schema.anyOf()) {
                startValue(alt, rest, c, out);
            }
            return;
        }
        var t = schema.types;
        if ((c == '{' || c == '[') && rest != null && rest.depth >= MAX_DEPTH) {
            return;
        }
        if (c == '{' && t.contains(Schema.Type.OBJECT)) {
            out.add(new Stack(new Obj(schema, 0, Set.of(), null, 0), rest));
        } else if (c == '[' && t.contains(Schema.Type.ARRAY)) {
            out.add(new Stack(new Arr(schema, 0, 0, 0), rest));
        } else if (c == '"' && t.contains(Schema.Type.STRING)) {
            out.add(new Stack(new Str(false, null, 0, options.stringGuard(), JsonStrings.startCheck(schema.string)), rest));
        } else if ((c == '-' || (c >= '0' && c <= '9')) && (t.contains(Schema.Type.INTEGER) || t.contains(Schema.Type.NUMBER))) {
            Num n = JsonNumbers.start(!t.contains(Schema.Type.NUMBER), schema.number, c);
            if (n != null) {
                out.add(new Stack(n, rest));
            }
        } else if (c == 't' && t.contains(Schema.Type.BOOLEAN) && !Boolean.FALSE.equals(schema.bool)) {
            out.add(new Stack(new Lit("true", 1), rest));
        } else if (c == 'f' && t.contains(Schema.Type.BOOLEAN) && !Boolean.TRUE.equals(schema.bool)) {
            out.add(new Stack(new Lit("false", 1), rest));
        } else if (c == 'n' && t.contains(Schema.Type.NULL)) {
            out.add(new Stack(new Lit("null", 1), rest));
        }
    }

    private void objectStep(Obj o, Stack s, char c, List<Stack> out) {
        if (ws(c)) {
            int w = space(o.ws(), c, false);
            if (w >= 0) {
                out.add(new Stack(new Obj(o.schema(), o.state(), o.seen(), o.key(), w), s.rest()));
            }
            return;
        }
        switch (o.state()) {
            case 0, 1 -> {
                if (c == '"' && ObjectRules.morePropertiesAllowed(o)) {
                    // a listed property name is fixed text: only free keys are watched for the format's tags
                    TagGuard keyGuard = o.schema().takesOtherKeys() ? options.stringGuard() : null;
                    out.add(new Stack(new Str(true, "", 0, keyGuard, null), new Stack(new Obj(o.schema(), o.state(), o.seen(), null, 0), s.rest())));
                } else if (c == '}' && o.state() == 0 && ObjectRules.closable(o)) {
                    out.add(completed(s.rest()));
                }
            }
            case 2 -> {
                if (c == ':') {
                    Set<String> seen = new HashSet<>(o.seen());
                    seen.add(o.key());
                    Stack after = new Stack(new Obj(o.schema(), 3, Set.copyOf(seen), null, 0), s.rest());
                    out.add(new Stack(new Value(o.schema().propertySchema(o.key()), 0), after));
                }
            }
            case 3 -> {
                if (c == ',' && ObjectRules.morePropertiesAllowed(o)) {
                    out.add(new Stack(new Obj(o.schema(), 1, o.seen(), null, 0), s.rest()));
                } else if (c == '}' && ObjectRules.closable(o)) {
                    out.add(completed(s.rest()));
                }
            }
            default -> {
            }
        }
    }

    /** The item count an array state keeps: past minItems and prefixItems, an array without maxItems counts no further. */
    private static int counted(Schema array, int count) {
        return array.maxItems() == Integer.MAX_VALUE ? Math.min(count, Math.max(array.minItems(), array.prefixItems().size())) : count;
    }

    /** The schema of item {@code i}, or null when no such item can be written. */
    private static Schema item(Schema array, int i) {
        if (i >= array.maxItems()) {
            return null;
        }
        Schema s = array.itemAt(i);
        return s == null ? Schema.any() : s.satisfiable() ? s : null;
    }

    private void arrayStep(Arr a, Stack s, char c, List<Stack> out) {
        if (ws(c)) {
            int w = space(a.ws(), c, false);
            if (w >= 0) {
                out.add(new Stack(new Arr(a.schema(), a.state(), a.count(), w), s.rest()));
            }
            return;
        }
        switch (a.state()) {
            case 0, 2 -> {
                Schema items = item(a.schema(), a.count());
                if (c == ']' && a.state() == 0 && a.schema().minItems() == 0) {
                    out.add(completed(s.rest()));
                } else if (items != null) {
                    startValue(items, new Stack(new Arr(a.schema(), 1, counted(a.schema(), a.count() + 1), 0), s.rest()), c, out);
                }
            }
            case 1 -> {
                if (c == ',' && item(a.schema(), a.count()) != null) {
                    out.add(new Stack(new Arr(a.schema(), 2, a.count(), 0), s.rest()));
                } else if (c == ']' && a.count() >= a.schema().minItems()) {
                    out.add(completed(s.rest()));
                }
            }
            default -> {
            }
        }
    }

    /** Configurations (for tests and diagnostics). */
    List<Stack> configurations() {
        return List.of(configs);
    }
}

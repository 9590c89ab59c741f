package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Recognizes, one character at a time, the prefixes of JSON documents that a {@link Schema}
 * accepts, in a form that always ends: whitespace between tokens is nothing, one space, or
 * one newline and at most 20 spaces or tabs of indentation; numbers have at most 16 integer
 * and 16 fraction digits and a 2-digit exponent, so every number it admits is a finite double,
 * non-zero unless written as zero (|x| &lt; 1e115, and &gt; 1e-115 otherwise: a 3-digit exponent let
 * a sampled 4915095129.31e350 through, which clients parse as infinity); a document may be framed by at most 4
 * whitespace characters (when the root allows it). A state is a set of configurations
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

    /** Inside an array. state 0: after '['; 1: after a value; 2: after ','. */
    record Arr(Schema schema, int state, int count, int ws) implements Frame {
    }

    /** Inside a string; key strings collect their text (to check property names); escape: 0 none, 1 after '\', 2..5 hex digits. */
    record Str(boolean key, String text, int escape, TagGuard guard) implements Frame {
    }

    /** Inside a number: state per the JSON number grammar (accepting: 2, 3, 5, 8), digits in the current part. */
    record Num(boolean integer, int state, int digits) implements Frame {
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
    record Options(TagGuard stringGuard, boolean rootSpace) {
    }

    private final Stack[] configs;
    private final Options options;
    private static final long STRING_SPECIALS = TokenTrie.CONTROLS | TokenTrie.bits("\"\\");
    private final long stable; // see Recognizer.stableExcept

    private JsonRecognizer(Stack[] configs, Options options) {
        this.configs = configs;
        this.options = options;
        long s = 0;
        for (Stack c : configs) {
            if (c.top() instanceof Str str && !str.key() && str.escape() == 0 && (str.guard() == null || str.guard().clear())) {
                s |= STRING_SPECIALS | (str.guard() == null ? 0 : str.guard().starts());
            } else {
                s = TokenTrie.NOT_STABLE;
                break;
            }
        }
        this.stable = s;
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
        if (stable >= 0 && (TokenTrie.bit(c) & stable) == 0) {
            return this;
        }
        List<Stack> out = new ArrayList<>(2);
        for (Stack s : configs) {
            step(s, c, out);
        }
        if (out.isEmpty()) {
            return null;
        }
        if (out.size() > 1) {
            out = new ArrayList<>(new LinkedHashSet<>(out));
        }
        return new JsonRecognizer(out.toArray(new Stack[0]), options);
    }

    @Override
    public JsonRecognizer feed(String text) {
        return (JsonRecognizer) Recognizer.super.feed(text);
    }

    @Override
    public boolean accepting() {
        for (Stack s : configs) {
            if (s.top() instanceof Done || (s.rest() == null && s.top() instanceof Num n && numberComplete(n.state()))) {
                return true;
            }
        }
        return false;
    }

    @Override
    public long stableExcept() {
        return stable;
    }

    @Override
    public boolean asciiNext() {
        for (Stack c : configs) {
            boolean ascii = switch (c.top()) {
                case Str str -> str.key() && str.escape() == 0 && asciiKeys((Obj) c.rest().top());
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
    private static Stack completed(Stack rest) {
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
                Num next = numberStep(n, c);
                if (next != null) {
                    out.add(new Stack(next, s.rest()));
                } else if (numberComplete(n.state())) {
                    step(completed(s.rest()), c, out); // the character ends the number and belongs to the parent
                }
            }
            case Str str -> stringStep(str, s, c, out);
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
        if (schema.enumValues() != null) {
            for (JsonNode e : schema.enumValues()) {
                String text = e.toString();
                if (text.charAt(0) == c) {
                    out.add(text.length() == 1 ? completed(rest) : new Stack(new Lit(text, 1), rest));
                }
            }
            return;
        }
        var t = schema.types();
        if ((c == '{' || c == '[') && rest != null && rest.depth >= MAX_DEPTH) {
            return;
        }
        if (c == '{' && t.contains(Schema.Type.OBJECT)) {
            out.add(new Stack(new Obj(schema, 0, Set.of(), null, 0), rest));
        } else if (c == '[' && t.contains(Schema.Type.ARRAY)) {
            out.add(new Stack(new Arr(schema, 0, 0, 0), rest));
        } else if (c == '"' && t.contains(Schema.Type.STRING)) {
            out.add(new Stack(new Str(false, null, 0, options.stringGuard()), rest));
        } else if ((c == '-' || (c >= '0' && c <= '9')) && (t.contains(Schema.Type.INTEGER) || t.contains(Schema.Type.NUMBER))) {
            out.add(new Stack(numberStep(new Num(!t.contains(Schema.Type.NUMBER), 0, 0), c), rest));
        } else if (c == 't' && t.contains(Schema.Type.BOOLEAN)) {
            out.add(new Stack(new Lit("true", 1), rest));
        } else if (c == 'f' && t.contains(Schema.Type.BOOLEAN)) {
            out.add(new Stack(new Lit("false", 1), rest));
        } else if (c == 'n' && t.contains(Schema.Type.NULL)) {
            out.add(new Stack(new Lit("null", 1), rest));
        }
    }

    /** The number after {@code c}, or null if {@code c} cannot continue it. */
    private static Num numberStep(Num n, char c) {
        boolean digit = c >= '0' && c <= '9';
        boolean fraction = !n.integer() && c == '.';
        boolean exponent = !n.integer() && (c == 'e' || c == 'E');
        int d = n.digits();
        return switch (n.state()) {
            case 0 -> c == '-' ? new Num(n.integer(), 1, 0) : c == '0' ? new Num(n.integer(), 2, 1) : digit ? new Num(n.integer(), 3, 1) : null;
            case 1 -> c == '0' ? new Num(n.integer(), 2, 1) : digit ? new Num(n.integer(), 3, 1) : null;
            case 2 -> fraction ? new Num(false, 4, 0) : exponent ? new Num(false, 6, 0) : null;
            case 3 -> digit && d < MAX_INT_DIGITS ? new Num(n.integer(), 3, d + 1) : fraction ? new Num(false, 4, 0) : exponent ? new Num(false, 6, 0) : null;
            case 4 -> digit ? new Num(false, 5, 1) : null;
            case 5 -> digit && d < MAX_FRACTION_DIGITS ? new Num(false, 5, d + 1) : exponent ? new Num(false, 6, 0) : null;
            case 6 -> c == '+' || c == '-' ? new Num(false, 7, 0) : digit ? new Num(false, 8, 1) : null;
            case 7 -> digit ? new Num(false, 8, 1) : null;
            case 8 -> digit && d < MAX_EXPONENT_DIGITS ? new Num(false, 8, d + 1) : null;
            default -> null;
        };
    }

    private static boolean numberComplete(int state) {
        return state == 2 || state == 3 || state == 5 || state == 8;
    }

    private static void stringStep(Str str, Stack s, char c, List<Stack> out) {
        TagGuard g = str.guard();
        if (str.escape() == 1) {
            if ("\"\\/bfnrt".indexOf(c) >= 0) {
                String text = str.key() ? str.text() + unescape(c) : null;
                if (!str.key() || keyAllowed((Obj) s.rest().top(), text, false)) {
                    out.add(new Stack(new Str(str.key(), text, 0, g == null ? null : g.step(c)), s.rest()));
                }
            } else if (c == 'u' && (!str.key() || anyKey(((Obj) s.rest().top()).schema()))) {
                // a key's unicode escape is not resolved, so it is allowed only where any key is
                out.add(new Stack(new Str(str.key(), str.text(), 2, g == null ? null : g.step(c)), s.rest()));
            }
            return;
        }
        if (str.escape() >= 2) { // \\uXXXX: escape 2..5 count the hex digits
            if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
                out.add(new Stack(new Str(str.key(), str.text(), str.escape() == 5 ? 0 : str.escape() + 1, g == null ? null : g.step(c)), s.rest()));
            }
            return;
        }
        if (c == '"') {
            if (!str.key()) {
                out.add(completed(s.rest()));
                return;
            }
            Obj o = (Obj) s.rest().top();
            if (keyAllowed(o, str.text(), true)) {
                out.add(new Stack(new Obj(o.schema(), 2, o.seen(), str.text(), 0), s.rest().rest()));
            }
            return;
        }
        if (c < 0x20) {
            return;
        }
        TagGuard next = g == null ? null : g.step(c);
        if (g != null && next == null) {
            return; // a forbidden tag
        }
        if (c == '\\') {
            if (!str.key() || keyEscapePossible((Obj) s.rest().top(), str.text())) {
                out.add(new Stack(new Str(str.key(), str.text(), 1, next), s.rest()));
            }
        } else if (!str.key()) {
            out.add(next == g ? s : new Stack(new Str(false, null, 0, next), s.rest()));
        } else if (keyAllowed((Obj) s.rest().top(), str.text() + c, false)) {
            out.add(new Stack(new Str(true, str.text() + c, 0, next), s.rest()));
        }
    }

    private static String unescape(char c) {
        return switch (c) {
            case 'b' -> "\b";
            case 'f' -> "\f";
            case 'n' -> "\n";
            case 'r' -> "\r";
            case 't' -> "\t";
            default -> String.valueOf(c);
        };
    }

    /** Whether the object takes any key and names none: only there is a key's unresolved unicode escape harmless. */
    private static boolean anyKey(Schema object) {
        return object.additionalAllowed() && object.properties().isEmpty();
    }

    /** Whether every key the object may still take is ASCII (closed to other keys, ASCII property names). */
    private static boolean asciiKeys(Obj o) {
        if (o.schema().additionalAllowed()) {
            return false;
        }
        for (String p : o.schema().properties().keySet()) {
            if (!o.seen().contains(p) && !p.chars().allMatch(ch -> ch < 0x80)) {
                return false;
            }
        }
        return true;
    }

    /** Whether an escape after {@code key} can still lead to a property name (no dead end). */
    private static boolean keyEscapePossible(Obj o, String key) {
        if (o.schema().additionalAllowed()) {
            return true;
        }
        for (char e : "\"\\/bfnrt".toCharArray()) {
            if (keyAllowed(o, key + unescape(e), false)) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code key} (complete, or a prefix) can name a property not yet given. */
    private static boolean keyAllowed(Obj o, String key, boolean complete) {
        if (o.seen().contains(key) && complete) {
            return false;
        }
        if (o.schema().additionalAllowed()) {
            return true;
        }
        for (String p : o.schema().properties().keySet()) {
            if (!o.seen().contains(p) && (complete ? p.equals(key) : p.startsWith(key))) {
                return true;
            }
        }
        return false;
    }

    private static Schema propertySchema(Schema object, String key) {
        Schema p = object.properties().get(key);
        if (p != null) {
            return p;
        }
        return object.additional() != null ? object.additional() : Schema.any();
    }

    private static boolean requiredSeen(Obj o) {
        return o.seen().containsAll(o.schema().required());
    }

    /** Whether another property may still be written. */
    private static boolean morePropertiesAllowed(Obj o) {
        if (o.schema().additionalAllowed()) {
            return true;
        }
        for (String p : o.schema().properties().keySet()) {
            if (!o.seen().contains(p)) {
                return true;
            }
        }
        return false;
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
                if (c == '"' && morePropertiesAllowed(o)) {
                    // a listed property name is fixed text: only free keys are watched for the format's tags
                    TagGuard keyGuard = o.schema().additionalAllowed() ? options.stringGuard() : null;
                    out.add(new Stack(new Str(true, "", 0, keyGuard), new Stack(new Obj(o.schema(), o.state(), o.seen(), null, 0), s.rest())));
                } else if (c == '}' && o.state() == 0 && requiredSeen(o)) {
                    out.add(completed(s.rest()));
                }
            }
            case 2 -> {
                if (c == ':') {
                    Set<String> seen = new HashSet<>(o.seen());
                    seen.add(o.key());
                    Stack after = new Stack(new Obj(o.schema(), 3, Set.copyOf(seen), null, 0), s.rest());
                    out.add(new Stack(new Value(propertySchema(o.schema(), o.key()), 0), after));
                }
            }
            case 3 -> {
                if (c == ',' && morePropertiesAllowed(o)) {
                    out.add(new Stack(new Obj(o.schema(), 1, o.seen(), null, 0), s.rest()));
                } else if (c == '}' && requiredSeen(o)) {
                    out.add(completed(s.rest()));
                }
            }
            default -> {
            }
        }
    }

    private void arrayStep(Arr a, Stack s, char c, List<Stack> out) {
        if (ws(c)) {
            int w = space(a.ws(), c, false);
            if (w >= 0) {
                out.add(new Stack(new Arr(a.schema(), a.state(), a.count(), w), s.rest()));
            }
            return;
        }
        Schema items = a.schema().items() != null ? a.schema().items() : Schema.any();
        switch (a.state()) {
            case 0, 2 -> {
                if (c == ']' && a.state() == 0 && a.schema().minItems() == 0) {
                    out.add(completed(s.rest()));
                } else if (a.count() < a.schema().maxItems()) {
                    startValue(items, new Stack(new Arr(a.schema(), 1, a.count() + 1, 0), s.rest()), c, out);
                }
            }
            case 1 -> {
                if (c == ',' && a.count() < a.schema().maxItems()) {
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

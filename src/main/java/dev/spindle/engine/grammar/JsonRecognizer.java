package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Recognizes, one character at a time, the prefixes of JSON documents that a {@link Schema}
 * accepts. A state is a set of configurations (anyOf and enums branch); a configuration
 * is an immutable stack of frames, so trying a token on a copy costs nothing.
 */
public final class JsonRecognizer implements Recognizer {
    sealed interface Frame {
    }

    /** A value is expected (leading whitespace allowed). */
    record Value(Schema schema) implements Frame {
    }

    /** Inside an object. state 0: after '{'; 1: after ','; 2: key read, ':' expected; 3: after a value. */
    record Obj(Schema schema, int state, Set<String> seen, String key) implements Frame {
    }

    /** Inside an array. state 0: after '['; 1: after a value; 2: after ','. */
    record Arr(Schema schema, int state, int count) implements Frame {
    }

    /** Inside a string; {@code key} strings collect their text (to check property names). */
    record Str(boolean key, String text, int escape) implements Frame {
    }

    /** Inside a number; state per the JSON number grammar (accepting: 2, 3, 5, 8). */
    record Num(boolean integer, int state) implements Frame {
    }

    /** A fixed text (true, false, null, an enum or const value). */
    record Lit(String text, int pos) implements Frame {
    }

    /** The document is complete; only whitespace may follow. */
    record Done() implements Frame {
    }

    /** An immutable stack of frames. */
    record Stack(Frame top, Stack rest) {
    }

    private final Set<Stack> configs;

    private JsonRecognizer(Set<Stack> configs) {
        this.configs = configs;
    }

    public static JsonRecognizer start(Schema schema) {
        return new JsonRecognizer(Set.of(new Stack(new Value(schema), null)));
    }

    /** The state after {@code text}, or null if no accepted document has this prefix. */
    @Override
    public JsonRecognizer feed(String text) {
        Set<Stack> cur = configs;
        for (int i = 0; i < text.length(); i++) {
            Set<Stack> next = new LinkedHashSet<>();
            char c = text.charAt(i);
            for (Stack s : cur) {
                step(s, c, next);
            }
            if (next.isEmpty()) {
                return null;
            }
            cur = next;
        }
        return new JsonRecognizer(cur);
    }

    /** Whether the text so far is a complete accepted document. */
    @Override
    public boolean accepting() {
        for (Stack s : configs) {
            if (s.top() instanceof Done || (s.rest() == null && s.top() instanceof Num n && numberComplete(n.state()))) {
                return true;
            }
        }
        return false;
    }

    private static boolean ws(char c) {
        return c == ' ' || c == '\n' || c == '\t' || c == '\r';
    }

    /** The stack once the value on top of {@code rest} is complete. */
    private static Stack completed(Stack rest) {
        return rest == null ? new Stack(new Done(), null) : rest;
    }

    private static void step(Stack s, char c, Set<Stack> out) {
        switch (s.top()) {
            case Done d -> {
                if (ws(c)) {
                    out.add(s);
                }
            }
            case Value v -> {
                if (ws(c)) {
                    out.add(s);
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
                int next = numberStep(n, c);
                if (next >= 0) {
                    out.add(new Stack(new Num(n.integer(), next), s.rest()));
                } else if (numberComplete(n.state())) {
                    step(completed(s.rest()), c, out); // the character ends the number and belongs to the parent
                }
            }
            case Str str -> stringStep(str, s, c, out);
            case Obj o -> objectStep(o, s, c, out);
            case Arr a -> arrayStep(a, s, c, out);
        }
    }

    private static void startValue(Schema schema, Stack rest, char c, Set<Stack> out) {
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
        if (c == '{' && t.contains(Schema.Type.OBJECT)) {
            out.add(new Stack(new Obj(schema, 0, Set.of(), null), rest));
        } else if (c == '[' && t.contains(Schema.Type.ARRAY)) {
            out.add(new Stack(new Arr(schema, 0, 0), rest));
        } else if (c == '"' && t.contains(Schema.Type.STRING)) {
            out.add(new Stack(new Str(false, null, 0), rest));
        } else if ((c == '-' || (c >= '0' && c <= '9')) && (t.contains(Schema.Type.INTEGER) || t.contains(Schema.Type.NUMBER))) {
            int state = numberStep(new Num(!t.contains(Schema.Type.NUMBER), 0), c);
            out.add(new Stack(new Num(!t.contains(Schema.Type.NUMBER), state), rest));
        } else if (c == 't' && t.contains(Schema.Type.BOOLEAN)) {
            out.add(new Stack(new Lit("true", 1), rest));
        } else if (c == 'f' && t.contains(Schema.Type.BOOLEAN)) {
            out.add(new Stack(new Lit("false", 1), rest));
        } else if (c == 'n' && t.contains(Schema.Type.NULL)) {
            out.add(new Stack(new Lit("null", 1), rest));
        }
    }

    /** The next number state, or -1 if {@code c} cannot continue the number. */
    private static int numberStep(Num n, char c) {
        boolean digit = c >= '0' && c <= '9';
        return switch (n.state()) {
            case 0 -> c == '-' ? 1 : c == '0' ? 2 : digit ? 3 : -1;
            case 1 -> c == '0' ? 2 : digit ? 3 : -1;
            case 2 -> !n.integer() && c == '.' ? 4 : !n.integer() && (c == 'e' || c == 'E') ? 6 : -1;
            case 3 -> digit ? 3 : !n.integer() && c == '.' ? 4 : !n.integer() && (c == 'e' || c == 'E') ? 6 : -1;
            case 4, 5 -> digit ? 5 : n.state() == 5 && (c == 'e' || c == 'E') ? 6 : -1;
            case 6 -> c == '+' || c == '-' ? 7 : digit ? 8 : -1;
            case 7, 8 -> digit ? 8 : -1;
            default -> -1;
        };
    }

    private static boolean numberComplete(int state) {
        return state == 2 || state == 3 || state == 5 || state == 8;
    }

    private static void stringStep(Str str, Stack s, char c, Set<Stack> out) {
        if (str.escape() == 1) {
            if ("\"\\/bfnrt".indexOf(c) >= 0) {
                out.add(new Stack(new Str(str.key(), str.key() ? str.text() + unescape(c) : null, 0), s.rest()));
            } else if (c == 'u') {
                out.add(new Stack(new Str(str.key(), str.text(), 2), s.rest()));
            }
            return;
        }
        if (str.escape() >= 2) { // \\uXXXX: escape 2..5 count the hex digits
            if (Character.digit(c, 16) >= 0) {
                out.add(new Stack(new Str(str.key(), str.text(), str.escape() == 5 ? 0 : str.escape() + 1), s.rest()));
            }
            return;
        }
        if (c == '\\') {
            out.add(new Stack(new Str(str.key(), str.text(), 1), s.rest()));
        } else if (c == '"') {
            if (!str.key()) {
                out.add(completed(s.rest()));
                return;
            }
            Obj o = (Obj) s.rest().top();
            if (keyAllowed(o, str.text(), true)) {
                out.add(new Stack(new Obj(o.schema(), 2, o.seen(), str.text()), s.rest().rest()));
            }
        } else if (c >= 0x20) {
            if (!str.key()) {
                out.add(s);
            } else if (keyAllowed((Obj) s.rest().top(), str.text() + c, false)) {
                out.add(new Stack(new Str(true, str.text() + c, 0), s.rest()));
            }
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

    private static void objectStep(Obj o, Stack s, char c, Set<Stack> out) {
        if (ws(c)) {
            out.add(s);
            return;
        }
        switch (o.state()) {
            case 0, 1 -> {
                if (c == '"' && (o.schema().additionalAllowed() || o.seen().size() < o.schema().properties().size())) {
                    out.add(new Stack(new Str(true, "", 0), s));
                } else if (c == '}' && o.state() == 0 && requiredSeen(o)) {
                    out.add(completed(s.rest()));
                }
            }
            case 2 -> {
                if (c == ':') {
                    Set<String> seen = new HashSet<>(o.seen());
                    seen.add(o.key());
                    Stack after = new Stack(new Obj(o.schema(), 3, Set.copyOf(seen), null), s.rest());
                    out.add(new Stack(new Value(propertySchema(o.schema(), o.key())), after));
                }
            }
            case 3 -> {
                if (c == ',') {
                    out.add(new Stack(new Obj(o.schema(), 1, o.seen(), null), s.rest()));
                } else if (c == '}' && requiredSeen(o)) {
                    out.add(completed(s.rest()));
                }
            }
            default -> {
            }
        }
    }

    private static void arrayStep(Arr a, Stack s, char c, Set<Stack> out) {
        if (ws(c)) {
            out.add(s);
            return;
        }
        Schema items = a.schema().items() != null ? a.schema().items() : Schema.any();
        switch (a.state()) {
            case 0, 2 -> {
                if (c == ']' && a.state() == 0 && a.schema().minItems() == 0) {
                    out.add(completed(s.rest()));
                } else if (a.count() < a.schema().maxItems()) {
                    startValue(items, new Stack(new Arr(a.schema(), 1, a.count() + 1), s.rest()), c, out);
                }
            }
            case 1 -> {
                if (c == ',' && a.count() < a.schema().maxItems()) {
                    out.add(new Stack(new Arr(a.schema(), 2, a.count()), s.rest()));
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
        return new ArrayList<>(configs);
    }
}

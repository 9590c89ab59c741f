package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.chat.ChatFormat;
import dev.spindle.grammar.JsonRecognizer;
import dev.spindle.grammar.Recognizer;
import dev.spindle.grammar.Schema;
import dev.spindle.grammar.StateSets;
import dev.spindle.grammar.TagGuard;
import dev.spindle.grammar.TokenTrie;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The tool calls Nanbeige writes, as a language:
 * {@code <tool_call>\n<function=NAME>\n(<parameter=KEY>\nVALUE\n</parameter>\n)*</function>\n</tool_call>},
 * calls separated by one newline. NAME is an offered function; KEY one of its parameters
 * (each once, every required one present; others only where its schema allows them);
 * VALUE is typed by the parameter's schema: raw text for a string (one of the literals for
 * a string enum or const; free text that never contains the format's tags, so that it can
 * neither close the call early nor swallow the turn), a JSON document of the schema otherwise.
 *
 * <p>Forced ({@link #forced}: tool_choice "required" or a named function) the reply is only
 * calls. Lazy ({@link #lazy}: tool_choice "auto") the reply is free text until the model
 * opens {@code <tool_call>}, and from there constrained as a forced call is (llama.cpp's
 * grammar triggers are the same idea).
 */
public final class ToolCallRecognizer implements Recognizer {
    /** The markup of Nanbeige's chat format that no value may contain. */
    public static final List<String> TAGS = ChatFormat.MARKUP;
    static final String OPEN = ChatFormat.CALL_OPEN;
    private static final String AFTER_OPEN = "\n" + ChatFormat.FUNCTION_OPEN;
    private static final String PARAM = ChatFormat.PARAMETER_OPEN;
    private static final String CLOSE = ChatFormat.FUNCTION_CLOSE + "\n" + ChatFormat.CALL_CLOSE;
    private static final String END_VALUE = "\n" + ChatFormat.PARAMETER_CLOSE + "\n";
    private static final TagGuard RAW_VALUE = TagGuard.of(TAGS, "\n" + ChatFormat.PARAMETER_CLOSE);
    private static final TagGuard TRIGGER = TagGuard.of(List.of(), OPEN);
    private static final JsonRecognizer.Options JSON_VALUE = new JsonRecognizer.Options(TagGuard.of(TAGS, null), false);

    /** What the whole reply may hold: the functions (name to parameters object schema) and how many calls. */
    private record Grammar(Map<String, Schema> functions, int minCalls, int maxCalls) {
    }

    sealed interface St {
    }

    /** Free text before any call (lazy mode), watching for the opening tag. */
    record Free(TagGuard trigger) implements St {
    }

    /** Forced mode before the first call: at most 4 whitespace characters, then the opening tag. */
    record Start(int ws) implements St {
    }

    record Lit(String text, int pos, St then) implements St {
    }

    record Name(String buf, int calls) implements St {
    }

    record Params(String fn, Set<String> seen, int calls) implements St {
    }

    record Key(String fn, Set<String> seen, String buf, int calls) implements St {
    }

    record RawValue(String fn, Set<String> seen, TagGuard guard, int calls) implements St {
    }

    record JsonValue(String fn, Set<String> seen, JsonRecognizer json, int calls) implements St {
    }

    /** After {@code calls} complete calls. */
    record After(int calls) implements St {
    }

    private final Grammar grammar;
    private final St[] states;
    private final long stable; // see Recognizer.stableExcept

    private ToolCallRecognizer(Grammar grammar, St[] states) {
        this.grammar = grammar;
        this.states = states;
        long s = 0;
        for (St st : states) {
            long one = switch (st) {
                case Free f -> f.trigger().clear() ? f.trigger().starts() : TokenTrie.NOT_STABLE;
                case RawValue v -> v.guard().clear() ? v.guard().starts() : TokenTrie.NOT_STABLE;
                case JsonValue v -> v.json().stableExcept() | TokenTrie.bit('\n');
                default -> TokenTrie.NOT_STABLE;
            };
            s |= one;
        }
        this.stable = s;
    }

    /**
     * Why these functions cannot be written in the XML format (a function or parameter name that is
     * empty or holds {@code >}, {@code <} or a line break would end its tag), or null when they can.
     */
    public static String unwritableName(Map<String, Schema> functions) {
        for (var f : functions.entrySet()) {
            if (!writable(f.getKey())) {
                return "function name '" + f.getKey() + "' cannot be written in the XML call format";
            }
            for (String p : f.getValue().properties().keySet()) {
                if (!writable(p)) {
                    return "parameter name '" + p + "' of function '" + f.getKey() + "' cannot be written in the XML call format";
                }
            }
        }
        return null;
    }

    private static void requireWritable(Map<String, Schema> functions) {
        String why = unwritableName(functions);
        if (why != null) {
            throw new IllegalArgumentException(why);
        }
    }

    private static boolean writable(String name) {
        return !name.isEmpty() && name.chars().noneMatch(c -> c == '>' || c == '<' || c == '\n' || c == '\r');
    }

    /**
     * A reply of calls only.
     *
     * @param functions name to the parameters' object schema
     * @param several   whether more than one call may be made (tool_choice "required" with parallel calls)
     */
    public static ToolCallRecognizer forced(Map<String, Schema> functions, boolean several) {
        requireWritable(functions);
        return new ToolCallRecognizer(new Grammar(Map.copyOf(functions), 1, several ? Integer.MAX_VALUE : 1), new St[]{new Start(0)});
    }

    /** Free text, or calls once {@code <tool_call>} is written. */
    public static ToolCallRecognizer lazy(Map<String, Schema> functions, boolean several) {
        requireWritable(functions);
        return new ToolCallRecognizer(new Grammar(Map.copyOf(functions), 0, several ? Integer.MAX_VALUE : 1), new St[]{new Free(TRIGGER)});
    }

    @Override
    public ToolCallRecognizer step(char c) {
        if (StateSets.unchanged(stable, c)) {
            return this;
        }
        St[] next = StateSets.next(states, c, this::step, St[]::new);
        return next == null ? null : new ToolCallRecognizer(grammar, next);
    }

    @Override
    public ToolCallRecognizer feed(String text) {
        return (ToolCallRecognizer) Recognizer.super.feed(text);
    }

    @Override
    public boolean accepting() {
        return Arrays.stream(states).anyMatch(s -> s instanceof Free || s instanceof After a && a.calls() >= grammar.minCalls());
    }

    @Override
    public long stableExcept() {
        return stable;
    }

    @Override
    public boolean freeText() {
        return states.length == 1 && states[0] instanceof Free f && f.trigger().clear();
    }

    @Override
    public boolean asciiNext() {
        for (St s : states) {
            boolean ascii = switch (s) {
                case Lit l -> l.text().charAt(l.pos()) < 0x80;
                case Start st -> true;
                case Params p -> true;
                case After a -> true;
                case JsonValue v -> v.json().asciiNext();
                default -> false; // free text, raw values, function and parameter names
            };
            if (!ascii) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ToolCallRecognizer r && r.grammar == grammar && java.util.Arrays.equals(r.states, states);
    }

    @Override
    public int hashCode() {
        return java.util.Arrays.hashCode(states);
    }

    private Schema parameters(String fn) {
        return grammar.functions().get(fn);
    }

    /** The schema of parameter {@code key} of {@code fn}; null when the key is not allowed. */
    private Schema parameter(String fn, String key) {
        return parameters(fn).propertySchema(key);
    }

    private boolean moreParameters(String fn, Set<String> seen) {
        Schema p = parameters(fn);
        long missing = p.required().stream().filter(r -> !seen.contains(r)).count();
        if (seen.size() + 1 + missing > p.maxProperties() && missing == 0) {
            return false;
        }
        return p.takesOtherKeys() || p.properties().entrySet().stream().anyMatch(e -> !seen.contains(e.getKey()) && e.getValue().satisfiable());
    }

    private void step(St s, char c, List<St> out) {
        switch (s) {
            case Free f -> {
                TagGuard g = f.trigger().step(c);
                if (g == TagGuard.TERMINATED) {
                    out.add(new Lit(AFTER_OPEN, 0, new Name("", 0)));
                } else if (g != null) {
                    out.add(g == f.trigger() ? f : new Free(g));
                }
            }
            case Start st -> {
                if ((c == ' ' || c == '\n') && st.ws() < 4) {
                    out.add(new Start(st.ws() + 1));
                } else {
                    step(new Lit(OPEN + AFTER_OPEN, 0, new Name("", 0)), c, out);
                }
            }
            case Lit l -> {
                if (l.text().charAt(l.pos()) == c) {
                    out.add(l.pos() + 1 == l.text().length() ? l.then() : new Lit(l.text(), l.pos() + 1, l.then()));
                }
            }
            case Name n -> {
                if (c == '>') {
                    if (grammar.functions().containsKey(n.buf())) {
                        out.add(new Lit("\n", 0, new Params(n.buf(), Set.of(), n.calls())));
                    }
                } else {
                    String b = n.buf() + c;
                    if (grammar.functions().keySet().stream().anyMatch(f -> f.startsWith(b))) {
                        out.add(new Name(b, n.calls()));
                    }
                }
            }
            case Params p -> {
                if (moreParameters(p.fn(), p.seen())) {
                    step(new Lit(PARAM, 0, new Key(p.fn(), p.seen(), "", p.calls())), c, out);
                }
                if (p.seen().containsAll(parameters(p.fn()).required()) && p.seen().size() >= parameters(p.fn()).minProperties()) {
                    step(new Lit(CLOSE, 0, new After(p.calls() + 1)), c, out);
                }
            }
            case Key k -> keyStep(k, c, out);
            case RawValue v -> {
                TagGuard g = v.guard().step(c);
                if (g == TagGuard.TERMINATED) {
                    out.add(new Lit("\n", 0, new Params(v.fn(), v.seen(), v.calls())));
                } else if (g != null) {
                    out.add(g == v.guard() ? v : new RawValue(v.fn(), v.seen(), g, v.calls()));
                }
            }
            case JsonValue v -> {
                if (c == '\n' && v.json().accepting()) {
                    out.add(new Lit(END_VALUE, 1, new Params(v.fn(), v.seen(), v.calls())));
                }
                JsonRecognizer r = v.json().step(c);
                if (r != null) {
                    out.add(new JsonValue(v.fn(), v.seen(), r, v.calls()));
                }
            }
            case After a -> {
                if (a.calls() < grammar.maxCalls()) {
                    step(new Lit("\n" + OPEN + AFTER_OPEN, 0, new Name("", a.calls())), c, out);
                }
            }
        }
    }

    /** Whether maxProperties leaves room for {@code key} after {@code seen}, the required keys still to come counted. */
    private static boolean roomFor(Schema p, Set<String> seen, String key) {
        long missing = p.required().stream().filter(r -> !seen.contains(r) && !r.equals(key)).count();
        return seen.size() + 1 + missing <= p.maxProperties();
    }

    private void keyStep(Key k, char c, List<St> out) {
        Schema p = parameters(k.fn());
        if (c == '>') {
            Schema value = k.seen().contains(k.buf()) || k.buf().isEmpty() || !roomFor(p, k.seen(), k.buf()) ? null : parameter(k.fn(), k.buf());
            if (value == null) {
                return;
            }
            Set<String> seen = new HashSet<>(k.seen());
            seen.add(k.buf());
            Set<String> now = Set.copyOf(seen);
            if (!value.stringOnly()) {
                out.add(new Lit("\n", 0, new JsonValue(k.fn(), now, JsonRecognizer.start(value, JSON_VALUE), k.calls())));
            } else if (value.enumValues() != null) {
                for (JsonNode e : value.enumValues()) {
                    out.add(new Lit("\n" + e.asText() + END_VALUE, 0, new Params(k.fn(), now, k.calls())));
                }
            } else {
                out.add(new Lit("\n", 0, new RawValue(k.fn(), now, RAW_VALUE, k.calls())));
            }
            return;
        }
        String b = k.buf() + c;
        boolean known = p.properties().keySet().stream().anyMatch(name -> !k.seen().contains(name) && name.startsWith(b) && p.propertySchema(name) != null);
        boolean other = p.takesOtherKeys() && c != '\n' && c != '<' && c != '"';
        if (known || other) {
            out.add(new Key(k.fn(), k.seen(), b, k.calls()));
        }
    }
}

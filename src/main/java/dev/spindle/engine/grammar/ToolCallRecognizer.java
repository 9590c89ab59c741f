package dev.spindle.engine.grammar;

import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The tool calls Nanbeige writes, as a language: one or more
 * {@code <tool_call>\n<function=NAME>\n(<parameter=KEY>\nVALUE\n</parameter>\n)*</function>\n</tool_call>}
 * separated by newlines, where NAME is an allowed function, KEY one of its parameters
 * (each once, every required one present), and VALUE free text for string parameters or a
 * JSON document matching the parameter's schema otherwise. Enforces tool_choice
 * "required" (any allowed function, at least one call) and a named function (exactly one call).
 */
public final class ToolCallRecognizer implements Recognizer {
    /** A function's parameters: name to schema (null schema: a string), and the required ones. */
    public record Function(Map<String, Schema> parameters, Set<String> stringParameters, List<String> required) {
    }

    private static final String OPEN = "<tool_call>\n<function=";
    private static final String PARAM = "<parameter=";
    private static final String CLOSE = "</function>\n</tool_call>";
    private static final String END_VALUE = "\n</parameter>\n";

    sealed interface St {
    }

    record Lit(String text, int pos, St then) implements St {
    }

    record Start() implements St {
    }

    record Name(String buf) implements St {
    }

    record Params(String fn, Set<String> seen) implements St {
    }

    record Key(String fn, Set<String> seen, String buf) implements St {
    }

    record StrVal(String fn, Set<String> seen, int matched) implements St {
    }

    record JsonVal(String fn, Set<String> seen, Recognizer json) implements St {
    }

    /** After a complete call: accepting; another call may follow when several are allowed. */
    record After() implements St {
    }

    private final Map<String, Function> functions;
    private final boolean several;
    private final Set<St> states;

    private ToolCallRecognizer(Map<String, Function> functions, boolean several, Set<St> states) {
        this.functions = functions;
        this.several = several;
        this.states = states;
    }

    /** @param several whether more than one call may be made (tool_choice "required") */
    public static ToolCallRecognizer start(Map<String, Function> functions, boolean several) {
        return new ToolCallRecognizer(Map.copyOf(functions), several, Set.of(new Start()));
    }

    @Override
    public ToolCallRecognizer feed(String text) {
        Set<St> cur = states;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            Set<St> next = new LinkedHashSet<>();
            for (St s : cur) {
                step(s, c, next);
            }
            if (next.isEmpty()) {
                return null;
            }
            cur = next;
        }
        return new ToolCallRecognizer(functions, several, cur);
    }

    @Override
    public boolean accepting() {
        return states.stream().anyMatch(s -> s instanceof After);
    }

    private void step(St s, char c, Set<St> out) {
        switch (s) {
            case Start st -> {
                if (c == ' ' || c == '\n') {
                    out.add(st);
                } else {
                    step(new Lit(OPEN, 0, new Name("")), c, out);
                }
            }
            case Lit l -> {
                if (l.text().charAt(l.pos()) == c) {
                    out.add(l.pos() + 1 == l.text().length() ? l.then() : new Lit(l.text(), l.pos() + 1, l.then()));
                }
            }
            case Name n -> {
                if (c == '>') {
                    if (functions.containsKey(n.buf())) {
                        out.add(new Lit("\n", 0, new Params(n.buf(), Set.of())));
                    }
                } else if (functions.keySet().stream().anyMatch(f -> f.startsWith(n.buf() + c))) {
                    out.add(new Name(n.buf() + c));
                }
            }
            case Params p -> {
                Function f = functions.get(p.fn());
                if (f.parameters().keySet().stream().anyMatch(k -> !p.seen().contains(k))) {
                    step(new Lit(PARAM, 0, new Key(p.fn(), p.seen(), "")), c, out);
                }
                if (p.seen().containsAll(f.required())) {
                    step(new Lit(CLOSE, 0, new After()), c, out);
                }
            }
            case Key k -> {
                Function f = functions.get(k.fn());
                if (c == '>') {
                    if (f.parameters().containsKey(k.buf()) && !k.seen().contains(k.buf())) {
                        Set<String> seen = new HashSet<>(k.seen());
                        seen.add(k.buf());
                        St value = f.stringParameters().contains(k.buf()) ? new StrVal(k.fn(), Set.copyOf(seen), 0)
                                : new JsonVal(k.fn(), Set.copyOf(seen), JsonRecognizer.start(f.parameters().get(k.buf())));
                        out.add(new Lit("\n", 0, value));
                    }
                } else if (f.parameters().keySet().stream().anyMatch(p -> !k.seen().contains(p) && p.startsWith(k.buf() + c))) {
                    out.add(new Key(k.fn(), k.seen(), k.buf() + c));
                }
            }
            case StrVal v -> {
                // free text until "\n</parameter>\n" (KMP over a terminator whose only border is "\n")
                int m = v.matched();
                if (c == END_VALUE.charAt(m)) {
                    m++;
                } else {
                    m = c == '\n' ? 1 : 0;
                }
                out.add(m == END_VALUE.length() ? new Params(v.fn(), v.seen()) : new StrVal(v.fn(), v.seen(), m));
            }
            case JsonVal v -> {
                if (c == '\n' && v.json().accepting()) {
                    out.add(new Lit(END_VALUE, 1, new Params(v.fn(), v.seen())));
                }
                Recognizer r = v.json().feed(String.valueOf(c));
                if (r != null) {
                    out.add(new JsonVal(v.fn(), v.seen(), r));
                }
            }
            case After a -> {
                if (several) {
                    step(new Lit("\n" + OPEN, 0, new Name("")), c, out);
                }
            }
        }
    }
}

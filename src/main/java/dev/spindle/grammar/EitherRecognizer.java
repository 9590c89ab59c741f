package dev.spindle.grammar;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The union of two languages: a text is accepted when either recognizer accepts it (e.g. a
 * reply that is either tool calls or a JSON document of the response format).
 */
public final class EitherRecognizer implements Recognizer {
    private final Recognizer[] alternatives; // live ones only

    private final long stable; // see Recognizer.stableExcept

    private EitherRecognizer(Recognizer[] alternatives) {
        this.alternatives = alternatives;
        long s = 0;
        for (Recognizer r : alternatives) {
            s |= r.stableExcept();
        }
        this.stable = s;
    }

    public static Recognizer of(Recognizer a, Recognizer b) {
        return new EitherRecognizer(new Recognizer[]{a, b});
    }

    @Override
    public Recognizer step(char c) {
        if (stable >= 0 && (TokenTrie.bit(c) & stable) == 0) {
            return this;
        }
        List<Recognizer> next = new ArrayList<>(alternatives.length);
        for (Recognizer r : alternatives) {
            Recognizer s = r.step(c);
            if (s != null) {
                next.add(s);
            }
        }
        return switch (next.size()) {
            case 0 -> null;
            case 1 -> next.getFirst();
            default -> new EitherRecognizer(next.toArray(new Recognizer[0]));
        };
    }

    @Override
    public boolean accepting() {
        return Arrays.stream(alternatives).anyMatch(Recognizer::accepting);
    }

    @Override
    public long stableExcept() {
        return stable;
    }

    @Override
    public boolean asciiNext() {
        return Arrays.stream(alternatives).allMatch(Recognizer::asciiNext);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof EitherRecognizer e && java.util.Arrays.equals(e.alternatives, alternatives);
    }

    @Override
    public int hashCode() {
        return java.util.Arrays.hashCode(alternatives);
    }
}

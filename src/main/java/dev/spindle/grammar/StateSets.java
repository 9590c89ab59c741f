package dev.spindle.grammar;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.function.IntFunction;

/**
 * The step a nondeterministic recognizer takes over its set of states (JSON's stacks, the tool-call format's states):
 * each state's successors on a character, in order, duplicates dropped; none means the text is refused.
 */
public final class StateSets {
    /** A state's successors on a character, appended to {@code out}. */
    @FunctionalInterface
    public interface Step<S> {
        void step(S state, char c, List<S> out);
    }

    private StateSets() {
    }

    /** Whether {@code c} leaves a recognizer unchanged: it is outside every character its state can react to ({@link Recognizer#stableExcept}). */
    public static boolean unchanged(long stable, char c) {
        return stable >= 0 && (TokenTrie.bit(c) & stable) == 0;
    }

    /** The states after {@code c}, without duplicates, or null where none is left. */
    public static <S> S[] next(S[] states, char c, Step<S> step, IntFunction<S[]> array) {
        List<S> out = new ArrayList<>(2);
        for (S s : states) {
            step.step(s, c, out);
        }
        if (out.isEmpty()) {
            return null;
        }
        if (out.size() > 1) {
            out = new ArrayList<>(new LinkedHashSet<>(out));
        }
        return out.toArray(array.apply(0));
    }
}

package dev.spindle.grammar;

import dev.spindle.grammar.JsonRecognizer.Num;

import static dev.spindle.grammar.JsonRecognizer.MAX_EXPONENT_DIGITS;
import static dev.spindle.grammar.JsonRecognizer.MAX_FRACTION_DIGITS;
import static dev.spindle.grammar.JsonRecognizer.MAX_INT_DIGITS;

/**
 * The number states of {@link JsonRecognizer}: the JSON number grammar with bounded digit
 * counts; under a {@link NumberRule} the number also keeps its text, has no exponent, and takes
 * a character only where some completion is in the rule.
 */
final class JsonNumbers {
    private JsonNumbers() {
    }

    /** The number begun by {@code c}, or null. */
    static Num start(boolean integer, NumberRule rule, char c) {
        return step(new Num(integer, 0, 0, rule, rule == null ? null : ""), c);
    }

    /** The number after {@code c}, or null if {@code c} cannot continue it. */
    static Num step(Num n, char c) {
        boolean digit = c >= '0' && c <= '9';
        boolean fraction = !n.integer() && c == '.';
        boolean exponent = !n.integer() && n.rule() == null && (c == 'e' || c == 'E');
        int d = n.digits();
        Num next = switch (n.state()) {
            case 0 -> c == '-' ? n.with(1, 0) : c == '0' ? n.with(2, 1) : digit ? n.with(3, 1) : null;
            case 1 -> c == '0' ? n.with(2, 1) : digit ? n.with(3, 1) : null;
            case 2 -> fraction ? n.with(4, 0) : exponent ? n.with(6, 0) : null;
            case 3 -> digit && d < MAX_INT_DIGITS ? n.with(3, d + 1) : fraction ? n.with(4, 0) : exponent ? n.with(6, 0) : null;
            case 4 -> digit ? n.with(5, 1) : null;
            case 5 -> digit && d < MAX_FRACTION_DIGITS ? n.with(5, d + 1) : exponent ? n.with(6, 0) : null;
            case 6 -> c == '+' || c == '-' ? n.with(7, 0) : digit ? n.with(8, 1) : null;
            case 7 -> digit ? n.with(8, 1) : null;
            case 8 -> digit && d < MAX_EXPONENT_DIGITS ? n.with(8, d + 1) : null;
            default -> null;
        };
        if (next == null || n.rule() == null) {
            return next;
        }
        Num typed = new Num(next.integer(), next.state(), next.digits(), n.rule(), n.text() + c);
        return n.rule().viable(typed.text(), typed.integer()) ? typed : null;
    }

    /** Whether the number may end here (accepting states 2, 3, 5, 8, and in the rule). */
    static boolean complete(Num n) {
        int s = n.state();
        return (s == 2 || s == 3 || s == 5 || s == 8) && (n.rule() == null || n.rule().accepts(n.text()));
    }
}

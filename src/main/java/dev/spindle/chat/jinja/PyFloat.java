package dev.spindle.chat.jinja;

import java.math.BigDecimal;

/** Python's {@code repr(float)}: the shortest digits that round-trip, in Python's layout ({@code 1e-05}, {@code 1.0}, {@code 1e+16}). */
final class PyFloat {
    private PyFloat() {
    }

    static String repr(double d) {
        if (Double.isNaN(d)) {
            return "nan";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "inf" : "-inf";
        }
        if (d == 0) {
            return (1 / d < 0) ? "-0.0" : "0.0";
        }
        // Java's Double.toString gives the shortest round-tripping digits (JDK 19+); re-lay them out
        BigDecimal bd = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        String digits = bd.unscaledValue().toString();
        int exp = digits.length() - 1 - bd.scale(); // decimal exponent of the first digit
        String sign = d < 0 ? "-" : "";
        if (exp < -4 || exp >= 16) {
            String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
            return sign + mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
        }
        if (exp >= digits.length() - 1) {
            return sign + digits + "0".repeat(exp - digits.length() + 1) + ".0";
        }
        if (exp >= 0) {
            return sign + digits.substring(0, exp + 1) + "." + digits.substring(exp + 1);
        }
        return sign + "0." + "0".repeat(-exp - 1) + digits;
    }
}

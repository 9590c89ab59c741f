package dev.spindle.grammar;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Bounds and multipleOf of a number, decided exactly on decimal prefixes. A number under a rule
 * is written without an exponent (plain decimal, at most 16 integer and 16 fraction digits, as
 * {@link JsonRecognizer} bounds every number), so the values a prefix can still become form a
 * few intervals: "12" becomes [12, 13), [120, 130), ... (up to 16 digits), "12.3" becomes
 * [12.3, 12.4); each interval holds the decimals of its grid (1e-16, or 1 for an integer), and
 * a prefix is taken only if one of them holds a value in bounds that is a multiple of
 * multipleOf (checked as the multiples of lcm(multipleOf, grid)).
 *
 * @param min        lower bound or null; {@code minExclusive}: whether it is excluded
 * @param max        upper bound or null; {@code maxExclusive}: whether it is excluded
 * @param multipleOf positive, or null
 */
record NumberRule(BigDecimal min, boolean minExclusive, BigDecimal max, boolean maxExclusive, BigDecimal multipleOf) {
    private static final BigDecimal LIMIT = BigDecimal.TEN.pow(JsonRecognizer.MAX_INT_DIGITS); // every magnitude is below
    private static final BigDecimal FINE = BigDecimal.ONE.movePointLeft(JsonRecognizer.MAX_FRACTION_DIGITS);
    private static final Map<List<BigDecimal>, BigDecimal> STEPS = new ConcurrentHashMap<>(); // lcm(multipleOf, grid)

    static NumberRule and(NumberRule a, NumberRule b) {
        if (a == null) {
            return b;
        }
        if (b == null) {
            return a;
        }
        BigDecimal min = a.min, max = a.max;
        boolean minEx = a.minExclusive, maxEx = a.maxExclusive;
        if (b.min != null && (min == null || b.min.compareTo(min) > 0 || b.min.compareTo(min) == 0 && b.minExclusive)) {
            min = b.min;
            minEx = b.minExclusive;
        }
        if (b.max != null && (max == null || b.max.compareTo(max) < 0 || b.max.compareTo(max) == 0 && b.maxExclusive)) {
            max = b.max;
            maxEx = b.maxExclusive;
        }
        BigDecimal m = a.multipleOf == null ? b.multipleOf : b.multipleOf == null ? a.multipleOf : lcm(a.multipleOf, b.multipleOf);
        return new NumberRule(min, minEx, max, maxEx, m);
    }

    static BigDecimal lcm(BigDecimal a, BigDecimal b) {
        int scale = Math.max(0, Math.max(a.scale(), b.scale()));
        BigInteger x = a.setScale(scale).unscaledValue(), y = b.setScale(scale).unscaledValue();
        return new BigDecimal(x.divide(x.gcd(y)).multiply(y), scale).stripTrailingZeros();
    }

    /** Whether some number written from {@code prefix} on (a prefix of the JSON number grammar, no exponent) is in the rule. */
    boolean viable(String prefix, boolean integer) {
        BigDecimal grid = integer ? BigDecimal.ONE : FINE;
        boolean neg = prefix.startsWith("-");
        String body = neg ? prefix.substring(1) : prefix;
        if (prefix.isEmpty()) {
            return some(LIMIT.negate(), false, LIMIT, false, grid);
        }
        int dot = body.indexOf('.');
        String ip = dot < 0 ? body : body.substring(0, dot);
        if (ip.isEmpty()) {
            return magnitude(neg, BigDecimal.ZERO, LIMIT, grid);
        }
        if (dot >= 0) {
            String frac = body.substring(dot + 1);
            BigDecimal a = new BigDecimal(frac.isEmpty() ? ip : ip + "." + frac);
            if (frac.length() >= JsonRecognizer.MAX_FRACTION_DIGITS) {
                return contains(neg ? a.negate() : a);
            }
            return magnitude(neg, a, a.add(BigDecimal.ONE.movePointLeft(frac.length())), grid);
        }
        if (ip.equals("0")) {
            return integer ? contains(BigDecimal.ZERO) : magnitude(neg, BigDecimal.ZERO, BigDecimal.ONE, grid);
        }
        BigDecimal n = new BigDecimal(ip);
        BigDecimal far = neg ? (min == null ? null : min.negate()) : max; // magnitudes past it are out of bounds, and grow with j
        for (int j = 0; j + ip.length() <= JsonRecognizer.MAX_INT_DIGITS; j++) {
            BigDecimal lo = n.movePointRight(j);
            if (far != null && lo.compareTo(far) > 0) {
                return false;
            }
            if (magnitude(neg, lo, n.add(BigDecimal.ONE).movePointRight(j), grid)) {
                return true;
            }
        }
        return false;
    }

    /** Whether the complete number {@code text} is in the rule. */
    boolean accepts(String text) {
        return contains(new BigDecimal(text));
    }

    boolean contains(BigDecimal v) {
        if (min != null && (minExclusive ? v.compareTo(min) <= 0 : v.compareTo(min) < 0)) {
            return false;
        }
        if (max != null && (maxExclusive ? v.compareTo(max) >= 0 : v.compareTo(max) > 0)) {
            return false;
        }
        return multipleOf == null || v.remainder(multipleOf).signum() == 0;
    }

    /** Magnitudes [a, b): the values [a, b) when positive, (-b, -a] when negative. */
    private boolean magnitude(boolean neg, BigDecimal a, BigDecimal b, BigDecimal grid) {
        return neg ? some(b.negate(), true, a.negate(), false, grid) : some(a, false, b, true, grid);
    }

    /** Whether a multiple of the grid (and multipleOf) lies in the interval from lo to hi, each end excluded or not, and in bounds. */
    private boolean some(BigDecimal lo, boolean loEx, BigDecimal hi, boolean hiEx, BigDecimal grid) {
        if (min != null && (min.compareTo(lo) > 0 || min.compareTo(lo) == 0 && minExclusive)) {
            lo = min;
            loEx = minExclusive;
        }
        if (max != null && (max.compareTo(hi) < 0 || max.compareTo(hi) == 0 && maxExclusive)) {
            hi = max;
            hiEx = maxExclusive;
        }
        if (multipleOf == null && lo.scale() <= grid.scale() && hi.scale() <= grid.scale()) { // both ends on the grid: no division
            BigDecimal v = grid.scale() == 0 ? lo.setScale(0, java.math.RoundingMode.CEILING) : lo;
            if (loEx && v.compareTo(lo) == 0) {
                v = v.add(grid);
            }
            return hiEx ? v.compareTo(hi) < 0 : v.compareTo(hi) <= 0;
        }
        if (STEPS.size() > 4096) {
            STEPS.clear(); // a cache, not a registry of every schema ever seen
        }
        BigDecimal step = multipleOf == null ? grid : STEPS.computeIfAbsent(List.of(multipleOf, grid), k -> lcm(k.get(0), k.get(1)));
        int width = hi.subtract(lo).compareTo(step);
        if (width > 0 || width == 0 && !(loEx && hiEx)) { // an interval as wide as the step holds a multiple of it
            return true;
        }
        BigDecimal k = lo.divideToIntegralValue(step);
        BigDecimal v = k.multiply(step);
        while (v.compareTo(lo) < 0 || loEx && v.compareTo(lo) == 0) {
            v = v.add(step);
        }
        return hiEx ? v.compareTo(hi) < 0 : v.compareTo(hi) <= 0;
    }
}

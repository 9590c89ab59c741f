package dev.spindle.cli;

import java.util.Arrays;

/**
 * The one figure of {@code bench --backend cuda} whose work runs between cuProfilerStart and cuProfilerStop
 * ({@code --profile-figure}), so that {@code ncu --profile-from-start off} profiles its kernels and no other's:
 * {@code prefill:N} (the prefill of N tokens), {@code decode:CONTEXT} (batch 1 at that context) or
 * {@code aggregate:STREAMS} (that many streams at 1K context).
 */
record ProfiledFigure(String kind, int n) {
    /** Parses {@code KIND:N}, checking that the bench measures that figure with the lengths it was given. */
    static ProfiledFigure parse(String text, int[] prefillLengths, int[] decodeContexts, int[] concurrency) {
        int colon = text.indexOf(':');
        String kind = colon < 0 ? text : text.substring(0, colon);
        int[] measured = switch (kind) {
            case "prefill" -> prefillLengths;
            case "decode" -> decodeContexts;
            case "aggregate" -> concurrency;
            default -> throw new IllegalArgumentException("--profile-figure: expected prefill:N, decode:CONTEXT or aggregate:STREAMS, got " + text);
        };
        int n;
        try {
            n = Integer.parseInt(text.substring(colon + 1));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("--profile-figure: expected " + kind + ":N with N a whole number, got " + text);
        }
        if (colon < 0 || Arrays.stream(measured).noneMatch(m -> m == n)) {
            throw new IllegalArgumentException("--profile-figure " + text + ": the bench measures " + kind + " at " + Arrays.toString(measured)
                    + " only (see --prefill-lengths, --decode-contexts, --concurrency)");
        }
        return new ProfiledFigure(kind, n);
    }

    boolean is(String kind, int n) {
        return this.kind.equals(kind) && this.n == n;
    }
}

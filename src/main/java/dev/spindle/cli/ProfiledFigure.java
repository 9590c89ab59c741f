package dev.spindle.cli;

import java.util.Arrays;

/**
 * The one figure of {@code bench --backend cuda} whose work runs between cuProfilerStart and cuProfilerStop
 * ({@code --profile-figure}), so that {@code ncu --profile-from-start off} profiles its kernels and no other's:
 * {@code prefill:N} (the prefill of N tokens), {@code decode:CONTEXT} (batch 1 at that context) or
 * {@code aggregate:STREAMS} (that many streams at 1K context).
 */
record ProfiledFigure(Kind kind, int n) {
    /** The bench's figures that may be profiled, named as --profile-figure spells them (lower case). */
    enum Kind { PREFILL, DECODE, AGGREGATE }

    /** Parses {@code KIND:N}, checking that the bench measures that figure with the lengths it was given. */
    static ProfiledFigure parse(String text, int[] prefillLengths, int[] decodeContexts, int[] concurrency) {
        int colon = text.indexOf(':');
        String name = colon < 0 ? text : text.substring(0, colon);
        Kind kind = Arrays.stream(Kind.values()).filter(k -> k.name().toLowerCase().equals(name)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("--profile-figure: expected prefill:N, decode:CONTEXT or aggregate:STREAMS, got "
                        + text));
        int[] measured = switch (kind) {
            case PREFILL -> prefillLengths;
            case DECODE -> decodeContexts;
            case AGGREGATE -> concurrency;
        };
        int n;
        try {
            n = Integer.parseInt(text.substring(colon + 1));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("--profile-figure: expected " + name + ":N with N a whole number, got " + text);
        }
        if (colon < 0 || Arrays.stream(measured).noneMatch(m -> m == n)) {
            throw new IllegalArgumentException("--profile-figure " + text + ": the bench measures " + name + " at " + Arrays.toString(measured)
                    + " only (see --prefill-lengths, --decode-contexts, --concurrency)");
        }
        return new ProfiledFigure(kind, n);
    }

    boolean is(Kind kind, int n) {
        return this.kind == kind && this.n == n;
    }
}

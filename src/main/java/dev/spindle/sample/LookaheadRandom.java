package dev.spindle.sample;

import java.util.ArrayDeque;
import java.util.random.RandomGenerator;

/**
 * A sequence's random stream that can be read ahead without being consumed: a verification window's rows are
 * drawn on the device at once, each with the uniform plain decoding would give that position's token, but only
 * the rows up to the first rejection emit a token and use up theirs. The values are the source's, in its order:
 * {@link #nextDouble} is {@code (nextLong() >>> 11) * 2^-53}, SplittableRandom's own formula, so wrapping one
 * changes no seeded draw.
 */
public final class LookaheadRandom implements RandomGenerator {
    private final RandomGenerator source;
    private final ArrayDeque<Long> ahead = new ArrayDeque<>(); // read from the source, not yet consumed

    public LookaheadRandom(RandomGenerator source) {
        this.source = source;
    }

    @Override
    public long nextLong() {
        Long next = ahead.pollFirst();
        return next != null ? next : source.nextLong();
    }

    @Override
    public double nextDouble() {
        return toDouble(nextLong());
    }

    /** The next {@code n} values {@link #nextDouble} will return, consuming none of them. */
    public double[] peekDoubles(int n) {
        while (ahead.size() < n) {
            ahead.addLast(source.nextLong());
        }
        double[] out = new double[n];
        int i = 0;
        for (long v : ahead) {
            if (i == n) {
                break;
            }
            out[i++] = toDouble(v);
        }
        return out;
    }

    private static double toDouble(long v) {
        return (v >>> 11) * 0x1.0p-53;
    }
}

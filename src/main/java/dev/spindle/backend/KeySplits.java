package dev.spindle.backend;

/**
 * Where attention cuts a row's keys into splits: each split's softmax state is computed on its own and the
 * splits are folded in order (docs/KERNELS.md, "Attention numerics"), so these boundaries fix the order of
 * every reduction. They depend on absolute key positions alone (never on the batch, the window or a CTA count),
 * which keeps decode rows equal to prefill rows. The rule: a split is 1/64 of its octave and at least
 * {@link #MIN} keys, so keys below 16,384 are cut into 128-key splits, [16K, 32K) into 256-key ones, [32K, 64K)
 * into 512, and so on: a 128K-token row has 320 splits rather than 1,024, a 512K one 448. A long row's split
 * states, written by decode CTAs and folded one after another, thus stay few, while short rows keep the small
 * splits that spread their decode over many CTAs (docs/bench/CHOICES.md). The CUDA kernels compute the same
 * rule (attention.cuh: split_of, split_start); the CPU twin walks it.
 */
public final class KeySplits {
    /** Keys of the smallest split, the size of every split below {@link #FLAT}. */
    public static final int MIN = 128;
    /** A split of octave [2^e, 2^(e+1)) holds 2^(e - SHIFT) keys (64 splits an octave). */
    public static final int SHIFT = 6;
    /** Keys from which splits grow: 2^14, where 1/64 of an octave first exceeds {@link #MIN}. */
    public static final int FLAT = 1 << 14;
    private static final int FLAT_SPLITS = FLAT / MIN, PER_OCTAVE = 1 << SHIFT, FLAT_LOG2 = 14;

    private KeySplits() {
    }

    /** The split that holds {@code key} (>= 0). */
    public static int of(int key) {
        if (key < FLAT) {
            return key / MIN;
        }
        int e = 31 - Integer.numberOfLeadingZeros(key);
        return FLAT_SPLITS + (e - FLAT_LOG2) * PER_OCTAVE + ((key - (1 << e)) >> (e - SHIFT));
    }

    /** The first key of split {@code split} (>= 0); {@code start(s + 1)} is one past its last. */
    public static int start(int split) {
        if (split < FLAT_SPLITS) {
            return split * MIN;
        }
        int j = split - FLAT_SPLITS, e = FLAT_LOG2 + j / PER_OCTAVE;
        if (e > 30) {
            throw new IllegalArgumentException("split " + split + " starts past 2^31 keys");
        }
        return (1 << e) + ((j % PER_OCTAVE) << (e - SHIFT));
    }

    /** Keys of the split that holds {@code key}. */
    public static int size(int key) {
        return key < FLAT ? MIN : 1 << (31 - Integer.numberOfLeadingZeros(key) - SHIFT);
    }

    /** The splits that cover keys [0, keys): none for none. */
    public static int count(int keys) {
        return keys <= 0 ? 0 : of(keys - 1) + 1;
    }
}

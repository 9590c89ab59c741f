package dev.spindle.step;

import java.util.Locale;

/**
 * How a backend's KV store holds K and V, one record per head vector of head_dim values: the values, then their scales.
 * bf16 is the default and exact (the model computes K and V in bf16, HF's numerics). The others are opt-in and disclosed
 * with their KL against the bf16 release; K and V are quantized when written and every attention path reads the stored
 * form, so the invariants hold as with bf16:
 * <ul>
 *   <li>{@code fp8}: E4M3 values, one bf16 scale a head vector (its largest magnitude over 448, rounded up);</li>
 *   <li>{@code q8}: int8 values in groups of 32, one bf16 scale a group (amax / 127, rounded up): llama.cpp's q8_0 layout;</li>
 *   <li>{@code q4}: int4 values (two a byte, the even one in the low nibble) in groups of 32, one bf16 scale a group
 *       (amax / 7, rounded up), symmetric in [-7, 7]: llama.cpp's q4_0 budget of 18 bytes a group.</li>
 *   <li>q8 and q4 store each head vector rotated ({@link #rotated}).</li>
 * </ul>
 */
public enum KvDtype {
    BF16("bf16", 0, false),
    FP8("fp8", 0, false),
    Q8("q8", 32, true),
    Q4("q4", 32, true);

    /** The name {@code --kv-cache-dtype}, the start log and /v1/models give. */
    public final String label;
    private final int group;
    /**
     * Whether head vectors are stored rotated (backend.KvRotation: a randomized Hadamard transform) before they are quantized:
     * the integer formats, whose one scale a group a rotation fits better (KL on the bundled model: q8 -25%, q4 -22%);
     * not fp8, whose floating-point values already follow each channel's size (+4% rotated). docs/KL.md.
     */
    public final boolean rotated;

    KvDtype(String label, int group, boolean rotated) {
        this.label = label;
        this.group = group;
        this.rotated = rotated;
    }

    /** Values sharing one scale in a head vector of {@code headDim} (the whole vector for fp8; none for bf16). */
    public int groupSize(int headDim) {
        return group == 0 ? headDim : Math.min(group, headDim);
    }

    /** Bytes of one stored head vector of {@code headDim} values, scales included. */
    public int vectorBytes(int headDim) {
        return switch (this) {
            case BF16 -> 2 * headDim;
            case FP8 -> headDim + 2;
            case Q8 -> headDim + 2 * (headDim / groupSize(headDim));
            case Q4 -> headDim / 2 + 2 * (headDim / groupSize(headDim));
        };
    }

    /** Whether a head vector of {@code headDim} values splits into this dtype's groups (and, for q4, whole bytes). */
    public boolean fits(int headDim) {
        return headDim % groupSize(headDim) == 0 && (this != Q4 || headDim % 2 == 0);
    }

    /** {@code bf16}, {@code fp8}, {@code q8} or {@code q4}. */
    public static KvDtype parse(String s) {
        String v = s == null ? "bf16" : s.trim().toLowerCase(Locale.ROOT);
        for (KvDtype d : values()) {
            if (d.label.equals(v)) {
                return d;
            }
        }
        throw new IllegalArgumentException("kv-cache-dtype: expected bf16, fp8, q8 or q4, got \"" + s + "\"");
    }
}

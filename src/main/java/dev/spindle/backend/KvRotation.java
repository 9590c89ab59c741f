package dev.spindle.backend;

import java.util.SplittableRandom;

/**
 * The orthonormal rotation a quantized KV cache stores its head vectors in: {@code R = H D / sqrt(n)}, H the
 * Walsh-Hadamard matrix of size n (head_dim, a power of two) and D fixed random signs (seeded: the same for every run,
 * layer and head). A rotation spreads a head vector's few large channels over all of them, so one scale fits a group
 * much better (the outlier channels of K are what a per-group scale loses most to). Scores are unchanged in exact
 * arithmetic ({@code (R q) . (R k) = q . k}) and the attention output is rotated back ({@code R^T} of the weighted sum
 * of rotated values). In fp32, by a fast transform in a fixed order, so every path computes the same bits.
 */
public final class KvRotation {
    private static final long SEED = 0x5EEDL;
    private final int n;
    private final float[] signs;
    private final float norm;

    public KvRotation(int n) {
        if (n < 1 || (n & (n - 1)) != 0) {
            throw new IllegalArgumentException("a quantized KV cache's rotation needs head_dim a power of two, got " + n);
        }
        this.n = n;
        this.signs = new float[n];
        SplittableRandom rnd = new SplittableRandom(SEED);
        for (int i = 0; i < n; i++) {
            signs[i] = rnd.nextBoolean() ? 1f : -1f;
        }
        this.norm = (float) (1 / Math.sqrt(n));
    }

    /** {@code dst[0, n) = R src[off, off + n)}. */
    public void rotate(float[] src, int off, float[] dst) {
        for (int i = 0; i < n; i++) {
            dst[i] = src[off + i] * signs[i];
        }
        hadamard(dst);
        for (int i = 0; i < n; i++) {
            dst[i] *= norm;
        }
    }

    /** {@code v = R^T v}, in place. */
    public void unrotate(float[] v) {
        hadamard(v);
        for (int i = 0; i < n; i++) {
            v[i] = v[i] * norm * signs[i];
        }
    }

    /** The unnormalised Walsh-Hadamard transform in place, butterflies of width 1, 2, 4, ... in index order. */
    private void hadamard(float[] v) {
        for (int h = 1; h < n; h <<= 1) {
            for (int i = 0; i < n; i += h << 1) {
                for (int j = i; j < i + h; j++) {
                    float a = v[j], b = v[j + h];
                    v[j] = a + b;
                    v[j + h] = a - b;
                }
            }
        }
    }
}

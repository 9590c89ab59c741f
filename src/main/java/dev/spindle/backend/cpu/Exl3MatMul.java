package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Exl3Matrix;

import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * The CPU linear layer over an EXL3 weight ({@link Exl3Matrix}), computed as the format is defined rather than through the
 * reconstructed matrix: {@code y = sv ⊙ H(Ŵᵀ · H(su ⊙ x))}, the Hadamard transforms over blocks of 128 in fp32 (a fixed
 * butterfly, then the 1/sqrt(128) scale), Ŵ decoded tile by tile to its fp16 values, each output one fp32 dot product in
 * {@link MatMul}'s fixed order, one rounding to bf16 at the end. Every step is per row of x, so a row's result never depends on
 * the other rows of its window.
 *
 * <p>A column slice [col, col + k) (a row-parallel rank's share of the inputs) must start at a multiple of 128 and end at one
 * or at the last input: the input transform mixes blocks of 128.
 */
final class Exl3MatMul {
    private static final float R_SCALE = (float) (1 / Math.sqrt(Exl3Matrix.BLOCK));
    private final Parallel parallel;

    Exl3MatMul(Parallel parallel) {
        this.parallel = parallel;
    }

    /** {@code out = x @ W[:, col, col + k)^T} for x (n, k), out (n, w.rows()), rounded to bf16 unless {@code rounded} is false. */
    void apply(float[] x, int n, Exl3Matrix w, int col, int k, float[] out, boolean rounded) {
        int b = Exl3Matrix.BLOCK;
        if (col % b != 0 || (k % b != 0 && col + k != w.cols()) || col + k > w.cols()) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + w.name() + " (EXL3, " + w.cols()
                    + " inputs): a slice starts at a multiple of 128 and ends at one or at the last input");
        }
        int span = Exl3Matrix.pad(k), outSpan = Exl3Matrix.pad(w.rows()), nOut = w.rows();
        // x' = H(su ⊙ x) over the slice's blocks, zeros past the last input
        float[] xh = new float[n * span];
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < k; i++) {
                xh[r * span + i] = x[r * k + i] * w.su(col + i);
            }
            for (int blk = 0; blk < span; blk += b) {
                hadamard(xh, r * span + blk);
            }
        }
        // y' = Ŵᵀ x', 16 outputs (a column of tiles) at a time
        float[] yh = new float[n * outSpan];
        int ktFirst = col / 16, kTiles = span / 16, ntFirst = w.first() / 16;
        parallel.forRange(outSpan / 16, Math.max(1, 4096 / Math.max(1, span)), (g0, g1) -> {
            float[] rows = new float[16 * span], tile = new float[256], scratch = new float[L];
            int[] words = new int[8 * w.bits()];
            for (int g = g0; g < g1; g++) {
                for (int kt = 0; kt < kTiles; kt++) {
                    w.tile(ktFirst + kt, ntFirst + g, tile, words);
                    for (int r = 0; r < 16; r++) {
                        for (int c = 0; c < 16; c++) {
                            rows[c * span + kt * 16 + r] = tile[r * 16 + c];
                        }
                    }
                }
                for (int r = 0; r < n; r++) {
                    for (int c = 0; c < 16; c++) {
                        yh[r * outSpan + g * 16 + c] = MatMul.dot(xh, r * span, rows, c * span, span, scratch);
                    }
                }
            }
        });
        // y = sv ⊙ H(y'), the padded outputs dropped
        for (int r = 0; r < n; r++) {
            for (int blk = 0; blk < outSpan; blk += b) {
                hadamard(yh, r * outSpan + blk);
            }
            for (int j = 0; j < nOut; j++) {
                float y = yh[r * outSpan + j] * w.sv(w.first() + j);
                out[r * nOut + j] = rounded ? Bf16.round(y) : y;
            }
        }
    }

    /** v[at, at + 128) = H v / sqrt(128): the Sylvester butterfly in a fixed order, then the scale. */
    static void hadamard(float[] v, int at) {
        for (int h = 1; h < Exl3Matrix.BLOCK; h <<= 1) {
            for (int i = at; i < at + Exl3Matrix.BLOCK; i += 2 * h) {
                for (int j = i; j < i + h; j++) {
                    float a = v[j], c = v[j + h];
                    v[j] = a + c;
                    v[j + h] = a - c;
                }
            }
        }
        for (int i = at; i < at + Exl3Matrix.BLOCK; i++) {
            v[i] *= R_SCALE;
        }
    }
}

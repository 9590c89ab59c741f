package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;

import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * The CPU linear layer over a weight whose rows expand to bf16 values (fp8: {@link Fp8MatMul}; ggml blocks:
 * {@link dev.spindle.model.GgmlMatrix#expand}): each weight row expanded once, then for each row of x one fp32 dot
 * product in the fixed order of {@link MatMul#dot(float[], int, float[], int, int, float[])} and one rounding to bf16 —
 * what the bf16 matmul computes over the expanded matrix, so a row's result never depends on the other rows of its step.
 */
final class ExpandedMatMul {
    /** A weight's rows as the bf16 values a linear layer reads. */
    interface Rows {
        /** Row {@code row}'s columns [col, col + k) into out[0, k). */
        void expand(int row, int col, int k, float[] out);
    }

    private final Parallel parallel;

    ExpandedMatMul(Parallel parallel) {
        this.parallel = parallel;
    }

    /**
     * {@code out = x @ W[:, col, col + k)^T} for x (n, k) and out (n, nOut), rounded to bf16 unless {@code rounded} is false
     * (a row-parallel rank's fp32 partial).
     */
    void apply(float[] x, int n, int nOut, Rows w, int col, int k, float[] out, boolean rounded) {
        int grain = Math.max(8, 32768 / Math.max(1, k * Math.max(1, n)));
        parallel.forRange(nOut, grain, (j0, j1) -> {
            float[] row = new float[k];
            float[] scratch = new float[L];
            for (int j = j0; j < j1; j++) {
                w.expand(j, col, k, row);
                for (int r = 0; r < n; r++) {
                    float acc = MatMul.dot(x, r * k, row, 0, k, scratch);
                    out[r * nOut + j] = rounded ? Bf16.round(acc) : acc;
                }
            }
        });
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * The CPU reference of a linear layer over an fp8 weight ({@link Fp8Matrix}): for each output, per block of columns
 * in order, one fp32 dot product of x with the block's decoded E4M3 values (exact in fp32), then
 * {@code acc = fma(scale, dot, acc)}, then one rounding to bf16. Each dot product has the fixed order of
 * {@link MatMul#dot(float[], int, float[], int, int, float[])} (four vector accumulators, the leftover vectors, the lanes left to right, the scalar tail), so a
 * row's result never depends on the other rows of its step.
 */
final class Fp8MatMul {
    private static final float[] DECODED = Fp8.table();
    private final Parallel parallel;

    Fp8MatMul(Parallel parallel) {
        this.parallel = parallel;
    }

    /**
     * {@code out = x @ W[:, col, col + k)^T} for x (n, k) and out (n, w.rows()), rounded to bf16 unless {@code rounded} is
     * false (a row-parallel rank's fp32 partial). The whole weight is col 0, k w.cols().
     */
    void apply(float[] x, int n, Fp8Matrix w, int col, int k, float[] out, boolean rounded) {
        int nOut = w.rows(), cols = w.cols(), bc = w.blockCols();
        if (col < 0 || col + k > cols) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + w.name() + "'s " + cols);
        }
        MemorySegment q = w.data().data();
        int grain = Math.max(8, 32768 / Math.max(1, k * Math.max(1, n)));
        parallel.forRange(nOut, grain, (j0, j1) -> {
            float[] row = new float[k];
            float[] scratch = new float[L];
            for (int j = j0; j < j1; j++) {
                long base = (long) j * cols + col;
                for (int i = 0; i < k; i++) {
                    row[i] = DECODED[q.get(ValueLayout.JAVA_BYTE, base + i) & 0xFF];
                }
                for (int r = 0; r < n; r++) {
                    float acc = 0f;
                    for (int b0 = col; b0 < col + k; ) {
                        int b1 = Math.min(col + k, (b0 / bc + 1) * bc);
                        float d = MatMul.dot(x, r * k + b0 - col, row, b0 - col, b1 - b0, scratch);
                        acc = Math.fma(w.scale(j, b0), d, acc);
                        b0 = b1;
                    }
                    out[r * nOut + j] = rounded ? Bf16.round(acc) : acc;
                }
            }
        });
    }
}

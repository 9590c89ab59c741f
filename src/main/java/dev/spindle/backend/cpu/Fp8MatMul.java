package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * The CPU reference of a linear layer over an fp8 weight ({@link Fp8Matrix}): each weight read as the bf16 value
 * {@code bf16(decode(q) * scale)} (fp32 product, one rounding), then for each output one fp32 dot product of x with those
 * values and one rounding to bf16: what the bf16 matmul computes over the expanded matrix, and what the CUDA backend's
 * fp8 kernels compute (fp8.cuh). The dot product has the fixed order of
 * {@link MatMul#dot(float[], int, float[], int, int, float[])} (four vector accumulators, the leftover vectors, the lanes
 * left to right, the scalar tail), so a row's result never depends on the other rows of its step.
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
                expand(q, w, j, col, k, bc, row);
                for (int r = 0; r < n; r++) {
                    float acc = MatMul.dot(x, r * k, row, 0, k, scratch);
                    out[r * nOut + j] = rounded ? Bf16.round(acc) : acc;
                }
            }
        });
    }

    /** Row j's columns [col, col + k) as the bf16 values they stand for, into row. */
    static void expand(MemorySegment q, Fp8Matrix w, int j, int col, int k, int bc, float[] row) {
        long base = (long) j * w.cols();
        for (int b0 = col; b0 < col + k; ) {
            int b1 = Math.min(col + k, (b0 / bc + 1) * bc);
            float s = w.scale(j, b0);
            for (int i = b0; i < b1; i++) {
                row[i - col] = Bf16.round(DECODED[q.get(ValueLayout.JAVA_BYTE, base + i) & 0xFF] * s);
            }
            b0 = b1;
        }
    }
}

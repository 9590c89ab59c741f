package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;
import jdk.incubator.vector.FloatVector;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.spindle.backend.cpu.Bf16Vectors.F;
import static dev.spindle.backend.cpu.Bf16Vectors.L;
import static dev.spindle.backend.cpu.Bf16Vectors.sumLanes;

/**
 * The CPU reference of a linear layer over an fp8 weight ({@link Fp8Matrix}): for each output, per block of columns
 * in order, one fp32 dot product of x with the block's decoded E4M3 values (exact in fp32), then
 * {@code acc = fma(scale, dot, acc)}, then one rounding to bf16. Each dot product has the fixed order of
 * {@link MatMul#dot} (four vector accumulators, the leftover vectors, the lanes left to right, the scalar tail), so a
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
                        float d = dot(x, r * k + b0 - col, row, b0 - col, b1 - b0, scratch);
                        acc = Math.fma(w.scale(j, b0), d, acc);
                        b0 = b1;
                    }
                    out[r * nOut + j] = rounded ? Bf16.round(acc) : acc;
                }
            }
        });
    }

    /** x[xo, xo + len) . w[wo, wo + len) in MatMul.dot's fixed order. */
    static float dot(float[] x, int xo, float[] w, int wo, int len, float[] scratch) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        int v = 0;
        for (; v + 4 * L <= len; v += 4 * L) {
            a0 = wv(w, wo + v).fma(xv(x, xo + v), a0);
            a1 = wv(w, wo + v + L).fma(xv(x, xo + v + L), a1);
            a2 = wv(w, wo + v + 2 * L).fma(xv(x, xo + v + 2 * L), a2);
            a3 = wv(w, wo + v + 3 * L).fma(xv(x, xo + v + 3 * L), a3);
        }
        if (v + L <= len) {
            a0 = wv(w, wo + v).fma(xv(x, xo + v), a0);
            v += L;
        }
        if (v + L <= len) {
            a1 = wv(w, wo + v).fma(xv(x, xo + v), a1);
            v += L;
        }
        if (v + L <= len) {
            a2 = wv(w, wo + v).fma(xv(x, xo + v), a2);
            v += L;
        }
        float s = sumLanes(a0.add(a1).add(a2.add(a3)), scratch);
        for (; v < len; v++) {
            s = Math.fma(w[wo + v], x[xo + v], s);
        }
        return s;
    }

    private static FloatVector xv(float[] x, int off) {
        return FloatVector.fromArray(F, x, off);
    }

    private static FloatVector wv(float[] w, int off) {
        return FloatVector.fromArray(F, w, off);
    }
}

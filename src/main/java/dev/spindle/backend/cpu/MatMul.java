package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Exl3Matrix;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.Matrix;
import dev.spindle.model.MlxMatrix;
import dev.spindle.model.Nvfp4Matrix;
import jdk.incubator.vector.FloatVector;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static dev.spindle.backend.cpu.Bf16Vectors.F;
import static dev.spindle.backend.cpu.Bf16Vectors.L;
import static dev.spindle.backend.cpu.Bf16Vectors.load;
import static dev.spindle.backend.cpu.Bf16Vectors.sumLanes;

/**
 * {@code out = bf16(x @ W^T)}: x (n, k) bf16-valued fp32 rows, W (nOut, k) bf16 in a
 * memory segment, fp32 accumulation, one rounding to bf16 per output (a linear layer
 * in HF's bf16 numerics).
 *
 * <p>Every output element is one dot product in one fixed order, whatever n is:
 * four vector accumulators a0..a3 over k in steps of 4L lanes, then up to three
 * leftover vectors into a0, a1, a2, then {@code (a0 + a1) + (a2 + a3)}, its lanes
 * summed left to right, then the scalar tail. The two kernels below (one row x one
 * weight row, two rows x one weight row for prefill) only share loads between outputs; per output they do the same operations
 * in the same order, so a row's result never depends on the window it came in.
 */
final class MatMul {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final Parallel parallel;
    private final ExpandedMatMul expanded;
    private final Exl3MatMul exl3;

    MatMul(Parallel parallel) {
        this.parallel = parallel;
        this.expanded = new ExpandedMatMul(parallel);
        this.exl3 = new Exl3MatMul(parallel);
    }

    /** {@code out = bf16(x @ W^T)} for a weight in its format: x (n, w.cols()), out (n, w.rows()). */
    void apply(float[] x, int n, Matrix w, float[] out) {
        switch (w) {
            case Bf16Matrix b -> apply(x, n, b.cols(), b.data().data(), b.rows(), out);
            case Fp8Matrix f -> expanded.apply(x, n, f.rows(), Fp8MatMul.rows(f), 0, f.cols(), out, true);
            case GgmlMatrix g -> expanded.apply(x, n, g.rows(), g::expand, 0, g.cols(), out, true);
            case MlxMatrix a -> expanded.apply(x, n, a.rows(), a::expand, 0, a.cols(), out, true);
            case Nvfp4Matrix a -> expanded.apply(x, n, a.rows(), a::expand, 0, a.cols(), out, true);
            case Exl3Matrix e -> exl3.apply(x, n, e, 0, e.cols(), out, true);
        }
    }

    /**
     * The same over columns [col, col + k) of W (a row-parallel rank's slice of o_proj or down_proj): x (n, k), out
     * (n, w.rows()); {@code rounded} false leaves each output in fp32 (a partial that an all-reduce sums before rounding).
     */
    void applyColumns(float[] x, int n, Matrix w, int col, int k, float[] out, boolean rounded) {
        switch (w) {
            case Bf16Matrix b -> apply(x, n, k, b.data().data(), b.cols(), col, b.rows(), out, rounded);
            case Fp8Matrix f -> expanded.apply(x, n, f.rows(), Fp8MatMul.rows(f), col, k, out, rounded);
            case GgmlMatrix g -> expanded.apply(x, n, g.rows(), g::expand, col, k, out, rounded);
            case MlxMatrix a -> expanded.apply(x, n, a.rows(), a::expand, col, k, out, rounded);
            case Nvfp4Matrix a -> expanded.apply(x, n, a.rows(), a::expand, col, k, out, rounded);
            case Exl3Matrix e -> exl3.apply(x, n, e, col, k, out, rounded);
        }
    }

    void apply(float[] x, int n, int k, MemorySegment w, int nOut, float[] out) {
        if (w.byteSize() != (long) nOut * k * 2) {
            throw new IllegalArgumentException("weight of " + w.byteSize() + " bytes is not (" + nOut + ", " + k + ") bf16");
        }
        apply(x, n, k, w, k, 0, nOut, out, true);
    }

    /**
     * The same over a column slice of W: {@code out = bf16(x @ W[:, col, col + k)^T)}, W's rows {@code row}
     * elements long (a row-parallel rank's slice of o_proj or down_proj). Each output is the one dot product
     * of k terms, as {@link #apply(float[], int, int, MemorySegment, int, float[])} computes it; {@code rounded}
     * false leaves it in fp32 (a partial that an all-reduce sums before the one rounding).
     */
    void apply(float[] x, int n, int k, MemorySegment w, int row, int col, int nOut, float[] out, boolean rounded) {
        if (col < 0 || col + k > row || w.byteSize() != (long) nOut * row * 2) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of a weight of " + w.byteSize() + " bytes as ("
                    + nOut + ", " + row + ") bf16");
        }
        int grain = Math.max(8, 32768 / Math.max(1, k * Math.max(1, n)));
        parallel.forRange(nOut, grain, (j0, j1) -> {
            float[] scratch = new float[L];
            int paired = n - n % 2;
            for (int j = j0; j < j1; j++) {
                long wo = ((long) j * row + col) * 2;
                for (int r = 0; r < paired; r += 2) {
                    dotRowsOfX2(x, r * k, k, w, wo, out, r * nOut + j, nOut, scratch, rounded);
                }
                if (paired < n) {
                    float d = dot(x, paired * k, k, w, wo, scratch);
                    out[paired * nOut + j] = rounded ? Bf16.round(d) : d;
                }
            }
        });
    }

    private static FloatVector xv(float[] x, int off) {
        return FloatVector.fromArray(F, x, off);
    }

    /** The one dot product: x[xo, xo+k) . W[wo (bytes), +k) in the fixed order. */
    static float dot(float[] x, int xo, int k, MemorySegment w, long wo, float[] scratch) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        int v = 0;
        for (; v + 4 * L <= k; v += 4 * L) {
            a0 = load(w, wo + 2L * v).fma(xv(x, xo + v), a0);
            a1 = load(w, wo + 2L * (v + L)).fma(xv(x, xo + v + L), a1);
            a2 = load(w, wo + 2L * (v + 2 * L)).fma(xv(x, xo + v + 2 * L), a2);
            a3 = load(w, wo + 2L * (v + 3 * L)).fma(xv(x, xo + v + 3 * L), a3);
        }
        if (v + L <= k) {
            a0 = load(w, wo + 2L * v).fma(xv(x, xo + v), a0);
            v += L;
        }
        if (v + L <= k) {
            a1 = load(w, wo + 2L * v).fma(xv(x, xo + v), a1);
            v += L;
        }
        if (v + L <= k) {
            a2 = load(w, wo + 2L * v).fma(xv(x, xo + v), a2);
            v += L;
        }
        float s = sumLanes(a0.add(a1).add(a2.add(a3)), scratch);
        for (; v < k; v++) {
            s = Math.fma(Bf16.toFloat(w.get(BF16, wo + 2L * v)), x[xo + v], s);
        }
        return s;
    }

    /** The same fixed order over a weight already in fp32: x[xo, xo + len) . w[wo, wo + len) (decoded fp8 weights, decoded KV). */
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

    private static FloatVector wv(float[] w, int off) {
        return FloatVector.fromArray(F, w, off);
    }

    /** {@link #dot} of two consecutive rows of x with one weight row (prefill), sharing the weight loads. */
    private static void dotRowsOfX2(float[] x, int xo, int k, MemorySegment w, long wo, float[] out, int oo, int nOut, float[] scratch,
                                    boolean rounded) {
        int x1 = xo + k;
        FloatVector p0 = FloatVector.zero(F), p1 = p0, p2 = p0, p3 = p0; // row 0
        FloatVector q0 = p0, q1 = p0, q2 = p0, q3 = p0;                  // row 1
        int v = 0;
        for (; v + 4 * L <= k; v += 4 * L) {
            FloatVector wa = load(w, wo + 2L * v), wb = load(w, wo + 2L * (v + L));
            FloatVector wc = load(w, wo + 2L * (v + 2 * L)), wd = load(w, wo + 2L * (v + 3 * L));
            p0 = wa.fma(xv(x, xo + v), p0);
            p1 = wb.fma(xv(x, xo + v + L), p1);
            p2 = wc.fma(xv(x, xo + v + 2 * L), p2);
            p3 = wd.fma(xv(x, xo + v + 3 * L), p3);
            q0 = wa.fma(xv(x, x1 + v), q0);
            q1 = wb.fma(xv(x, x1 + v + L), q1);
            q2 = wc.fma(xv(x, x1 + v + 2 * L), q2);
            q3 = wd.fma(xv(x, x1 + v + 3 * L), q3);
        }
        if (v + L <= k) {
            FloatVector ww = load(w, wo + 2L * v);
            p0 = ww.fma(xv(x, xo + v), p0);
            q0 = ww.fma(xv(x, x1 + v), q0);
            v += L;
        }
        if (v + L <= k) {
            FloatVector ww = load(w, wo + 2L * v);
            p1 = ww.fma(xv(x, xo + v), p1);
            q1 = ww.fma(xv(x, x1 + v), q1);
            v += L;
        }
        if (v + L <= k) {
            FloatVector ww = load(w, wo + 2L * v);
            p2 = ww.fma(xv(x, xo + v), p2);
            q2 = ww.fma(xv(x, x1 + v), q2);
            v += L;
        }
        float s0 = sumLanes(p0.add(p1).add(p2.add(p3)), scratch);
        float s1 = sumLanes(q0.add(q1).add(q2.add(q3)), scratch);
        for (; v < k; v++) {
            float wv = Bf16.toFloat(w.get(BF16, wo + 2L * v));
            s0 = Math.fma(wv, x[xo + v], s0);
            s1 = Math.fma(wv, x[x1 + v], s1);
        }
        out[oo] = rounded ? Bf16.round(s0) : s0;
        out[oo + nOut] = rounded ? Bf16.round(s1) : s1;
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
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
 * <p>Every output element is one dot product with the same accumulation order
 * whatever n is: two vector accumulators over k in steps of L lanes, their lane sum
 * left to right, then the scalar tail. Rows are processed four at a time (sharing
 * each weight load) or one at a time with identical per-row arithmetic, so a row's
 * result never depends on the window it came in.
 */
final class MatMul {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final Parallel parallel;

    MatMul(Parallel parallel) {
        this.parallel = parallel;
    }

    void apply(float[] x, int n, int k, MemorySegment w, int nOut, float[] out) {
        if (w.byteSize() != (long) nOut * k * 2) {
            throw new IllegalArgumentException("weight of " + w.byteSize() + " bytes is not (" + nOut + ", " + k + ") bf16");
        }
        int grain = Math.max(8, 32768 / Math.max(1, k * Math.max(1, n)));
        parallel.forRange(nOut, grain, (j0, j1) -> {
            float[] scratch = new float[L];
            for (int j = j0; j < j1; j++) {
                long wo = (long) j * k * 2;
                int r = 0;
                for (; r + 4 <= n; r += 4) {
                    dot4(x, r * k, k, w, wo, out, r * nOut + j, nOut, scratch);
                }
                for (; r < n; r++) {
                    out[r * nOut + j] = Bf16.round(dot(x, r * k, k, w, wo, scratch));
                }
            }
        });
    }

    /** The one dot product: x[xo, xo+k) . W[wo (bytes), +k), fp32 accumulation in the fixed order. */
    static float dot(float[] x, int xo, int k, MemorySegment w, long wo, float[] scratch) {
        FloatVector a0 = FloatVector.zero(F);
        FloatVector a1 = FloatVector.zero(F);
        int v = 0;
        for (; v + 2 * L <= k; v += 2 * L) {
            a0 = load(w, wo + 2L * v).fma(FloatVector.fromArray(F, x, xo + v), a0);
            a1 = load(w, wo + 2L * (v + L)).fma(FloatVector.fromArray(F, x, xo + v + L), a1);
        }
        if (v + L <= k) {
            a0 = load(w, wo + 2L * v).fma(FloatVector.fromArray(F, x, xo + v), a0);
            v += L;
        }
        float s = sumLanes(a0.add(a1), scratch);
        for (; v < k; v++) {
            s = Math.fma(Bf16.toFloat(w.get(BF16, wo + 2L * v)), x[xo + v], s);
        }
        return s;
    }

    /** {@link #dot} for four consecutive rows of x, sharing the weight loads; per row the same operations in the same order. */
    private static void dot4(float[] x, int xo, int k, MemorySegment w, long wo, float[] out, int oo, int nOut, float[] scratch) {
        FloatVector a00 = FloatVector.zero(F), a01 = FloatVector.zero(F);
        FloatVector a10 = FloatVector.zero(F), a11 = FloatVector.zero(F);
        FloatVector a20 = FloatVector.zero(F), a21 = FloatVector.zero(F);
        FloatVector a30 = FloatVector.zero(F), a31 = FloatVector.zero(F);
        int x1 = xo + k, x2 = xo + 2 * k, x3 = xo + 3 * k;
        int v = 0;
        for (; v + 2 * L <= k; v += 2 * L) {
            FloatVector w0 = load(w, wo + 2L * v);
            FloatVector w1 = load(w, wo + 2L * (v + L));
            a00 = w0.fma(FloatVector.fromArray(F, x, xo + v), a00);
            a01 = w1.fma(FloatVector.fromArray(F, x, xo + v + L), a01);
            a10 = w0.fma(FloatVector.fromArray(F, x, x1 + v), a10);
            a11 = w1.fma(FloatVector.fromArray(F, x, x1 + v + L), a11);
            a20 = w0.fma(FloatVector.fromArray(F, x, x2 + v), a20);
            a21 = w1.fma(FloatVector.fromArray(F, x, x2 + v + L), a21);
            a30 = w0.fma(FloatVector.fromArray(F, x, x3 + v), a30);
            a31 = w1.fma(FloatVector.fromArray(F, x, x3 + v + L), a31);
        }
        if (v + L <= k) {
            FloatVector w0 = load(w, wo + 2L * v);
            a00 = w0.fma(FloatVector.fromArray(F, x, xo + v), a00);
            a10 = w0.fma(FloatVector.fromArray(F, x, x1 + v), a10);
            a20 = w0.fma(FloatVector.fromArray(F, x, x2 + v), a20);
            a30 = w0.fma(FloatVector.fromArray(F, x, x3 + v), a30);
            v += L;
        }
        float s0 = sumLanes(a00.add(a01), scratch);
        float s1 = sumLanes(a10.add(a11), scratch);
        float s2 = sumLanes(a20.add(a21), scratch);
        float s3 = sumLanes(a30.add(a31), scratch);
        for (; v < k; v++) {
            float wv = Bf16.toFloat(w.get(BF16, wo + 2L * v));
            s0 = Math.fma(wv, x[xo + v], s0);
            s1 = Math.fma(wv, x[x1 + v], s1);
            s2 = Math.fma(wv, x[x2 + v], s2);
            s3 = Math.fma(wv, x[x3 + v], s3);
        }
        out[oo] = Bf16.round(s0);
        out[oo + nOut] = Bf16.round(s1);
        out[oo + 2 * nOut] = Bf16.round(s2);
        out[oo + 3 * nOut] = Bf16.round(s3);
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import jdk.incubator.vector.FloatVector;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static dev.spindle.backend.cpu.Bf16Vectors.F;
import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * The element-wise and row-wise kernels of the forward pass, with HF's bf16 rounding
 * points. Activations are fp32 arrays holding bf16 values, row-major (rows, width).
 * Transcendentals use StrictMath so interpreted and compiled code agree bit for bit.
 */
public final class CpuKernels {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private CpuKernels() {
    }

    /** out[r] = embedding[tokens[r]]: (n, hidden). */
    public static void embed(int[] tokens, MemorySegment table, int vocab, int hidden, float[] out) {
        for (int r = 0; r < tokens.length; r++) {
            int t = tokens[r];
            if (t < 0 || t >= vocab) {
                throw new IllegalArgumentException("token id " + t + " is outside the vocabulary [0, " + vocab + ")");
            }
            long base = (long) t * hidden * 2;
            for (int i = 0; i < hidden; i++) {
                out[r * hidden + i] = Bf16.toFloat(table.get(BF16, base + 2L * i));
            }
        }
    }

    /**
     * RMSNorm as HF's LlamaRMSNorm: fp32 mean of squares, {@code bf16(x * rsqrt(ms + eps))},
     * then times the bf16 weight, rounded again.
     */
    public static void rmsNorm(float[] x, int n, int width, MemorySegment weight, float eps, float[] out) {
        float[] scratch = new float[L];
        for (int r = 0; r < n; r++) {
            int o = r * width;
            FloatVector acc = FloatVector.zero(F);
            int i = 0;
            for (; i + L <= width; i += L) {
                FloatVector v = FloatVector.fromArray(F, x, o + i);
                acc = v.fma(v, acc);
            }
            float ss = Bf16Vectors.sumLanes(acc, scratch);
            for (; i < width; i++) {
                ss = Math.fma(x[o + i], x[o + i], ss);
            }
            float inv = 1f / (float) Math.sqrt(ss / width + eps);
            for (int j = 0; j < width; j++) {
                float normed = Bf16.round(x[o + j] * inv);
                out[o + j] = Bf16.round(normed * Bf16.toFloat(weight.get(BF16, 2L * j)));
            }
        }
    }

    /**
     * Rotary embedding, rotate-half (NeoX) layout over the full head:
     * {@code bf16(bf16(x*cos) + bf16(rotate_half(x)*sin))} with cos/sin already bf16.
     *
     * @param x   (n, heads, headDim), rotated in place
     * @param cos (n, headDim/2) per row, bf16-valued
     */
    public static void rope(float[] x, int n, int heads, int headDim, float[] cos, float[] sin) {
        int half = headDim / 2;
        for (int r = 0; r < n; r++) {
            for (int h = 0; h < heads; h++) {
                int o = (r * heads + h) * headDim;
                for (int i = 0; i < half; i++) {
                    float c = cos[r * half + i];
                    float s = sin[r * half + i];
                    float a = x[o + i];
                    float b = x[o + i + half];
                    x[o + i] = Bf16.round(Bf16.round(a * c) + Bf16.round(-b * s));
                    x[o + i + half] = Bf16.round(Bf16.round(b * c) + Bf16.round(a * s));
                }
            }
        }
    }

    /** gate := bf16(bf16(silu(gate)) * up), silu computed in fp32 as x / (1 + exp(-x)). */
    public static void swiGlu(float[] gate, float[] up, int count) {
        for (int i = 0; i < count; i++) {
            float g = gate[i];
            float act = Bf16.round(g / (1f + (float) StrictMath.exp(-g)));
            gate[i] = Bf16.round(act * up[i]);
        }
    }

    /** Row {@code row} of an fp8 weight as the bf16 values every linear layer reads (Fp8MatMul's expansion), into out. */
    public static void expandFp8(dev.spindle.model.Fp8Matrix w, int row, float[] out) {
        Fp8MatMul.expand(w.data().data(), w, row, 0, w.cols(), w.blockCols(), out);
    }

    /** The linear layer's CPU twin, single-threaded: out (n, nOut) = bf16(x (n, k) @ W^T). */
    public static void linear(float[] x, int n, int k, MemorySegment w, int nOut, float[] out) {
        try (Parallel one = new Parallel(1)) {
            new MatMul(one).apply(x, n, k, w, nOut, out);
        }
    }

    /** x := bf16(x + y): the residual add. */
    public static void addInto(float[] x, float[] y, int count) {
        int i = 0;
        for (; i + L <= count; i += L) {
            Bf16Vectors.round(FloatVector.fromArray(F, x, i).add(FloatVector.fromArray(F, y, i))).intoArray(x, i);
        }
        for (; i < count; i++) {
            x[i] = Bf16.round(x[i] + y[i]);
        }
    }
}

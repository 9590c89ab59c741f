package dev.spindle.backend.cpu;

import dev.spindle.backend.KeySplits;
import dev.spindle.backend.KvRotation;
import dev.spindle.model.Bf16;
import dev.spindle.step.BlockIds;
import dev.spindle.step.KvDtype;
import jdk.incubator.vector.FloatVector;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.spindle.backend.cpu.Bf16Vectors.F;
import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * Causal GQA attention over the paged KV store in Spindle's flash numerics, the rounding points of
 * the CUDA kernels (docs/KERNELS.md, "Attention numerics"): scores {@code s = fp32(q.k)} kept
 * in fp32; keys cut into fixed splits ({@link KeySplits}) walked in tiles of {@link #TILE}; in a split an
 * online softmax in powers of two ({@code c = fp32(scale log2 e)}; running max {@code m = fp32(max s c)};
 * per tile {@code p = 2^fma(s, c, -m)} in fp32, the split's sum {@code l} of those p, its unnormalised
 * {@code o = sum of bf16(p) v} in fp32, both rescaled by {@code 2^(m_old - m_new)} when the max grows);
 * the splits folded in order ({@code M = max, L = fma(L, a, l b), O = fma(O, a, o b)}, {@code a, b} the
 * powers to the new max); out {@code bf16(O / L)}. Powers under 2^-126 are zero, as the GPU's ex2 gives
 * them. Each (row, head) is computed alone, over positions 0..p in order, so a decode
 * row equals the same row in any window.
 */
final class PagedAttention {
    /** Keys per tile, fixed in absolute key positions (the CUDA kernels' KT); the splits are KeySplits'. */
    static final int TILE = 64;

    private final Parallel parallel;

    PagedAttention(Parallel parallel) {
        this.parallel = parallel;
    }

    /**
     * @param q        (rows, heads, headDim) roped queries, bf16-valued; this window's rows start at {@code firstRow}
     * @param out      (rows, heads, headDim) attention output, bf16-valued, written for this window's rows
     * @param start    position of the window's first row; K/V for positions [0, start + n) are in the store
     */
    void apply(float[] q, int firstRow, int n, int start, int heads, int kvHeads, CpuKvStore kv, BlockIds table, int slot, float[] out) {
        int hd = kv.headDim();
        int group = heads / kvHeads;
        float scale = (float) Math.pow(hd, -0.5), c = scale * LOG2E;
        MemorySegment seg = kv.data();
        boolean bf16 = kv.dtype() == KvDtype.BF16;
        parallel.forRange(n * heads, 1, (i0, i1) -> {
            float[] scratch = new float[L];
            float[] kvRow = new float[hd]; // a decoded K or V head vector (quantized stores)
            KvRotation rot = kv.rotation();
            float[] qRot = rot == null ? null : new float[hd], res = new float[hd]; // the rotated query; the output before rounding
            float[] s = new float[TILE];
            float[] o = new float[hd], acc = new float[hd];
            for (int i = i0; i < i1; i++) {
                int r = i / heads;
                int h = i % heads;
                int p = start + r;
                int kvh = h / group;
                int qo = ((firstRow + r) * heads + h) * hd;
                if (rot != null) {
                    rot.rotate(q, qo, qRot); // the stored keys are rotated: (R q) . (R k) = q . k
                }
                float bigM = Float.NEGATIVE_INFINITY, bigL = 0f;
                java.util.Arrays.fill(acc, 0f);
                for (int split = 0, s0 = 0; s0 <= p; s0 = KeySplits.start(++split)) {
                    float m = Float.NEGATIVE_INFINITY, l = 0f;
                    java.util.Arrays.fill(o, 0f);
                    for (int t0 = s0, s1 = Math.min(KeySplits.start(split + 1), p + 1); t0 < s1; t0 += TILE) {
                        int t1 = Math.min(t0 + TILE, p + 1);
                        float mt = Float.NEGATIVE_INFINITY;
                        for (int t = t0; t < t1; t++) {
                            if (bf16) {
                                s[t - t0] = MatMul.dot(q, qo, hd, seg, kv.offset(table, slot, 0, t, kvh), scratch);
                            } else {
                                kv.read(table, slot, 0, t, kvh, kvRow);
                                s[t - t0] = rot != null ? MatMul.dot(qRot, 0, kvRow, 0, hd, scratch) : MatMul.dot(q, qo, kvRow, 0, hd, scratch);
                            }
                            mt = Math.max(mt, s[t - t0]);
                        }
                        float mn = Math.max(m, mt * c);
                        float alpha = m == Float.NEGATIVE_INFINITY ? 0f : exp2(m - mn);
                        float sum = 0f;
                        scaleInto(o, alpha);
                        for (int t = t0; t < t1; t++) {
                            float e = exp2(Math.fma(s[t - t0], c, -mn));
                            sum += e;
                            if (bf16) {
                                addScaled(o, Bf16.round(e), seg, kv.offset(table, slot, 1, t, kvh));
                            } else {
                                kv.read(table, slot, 1, t, kvh, kvRow);
                                addScaled(o, Bf16.round(e), kvRow);
                            }
                        }
                        l = l * alpha + sum;
                        m = mn;
                    }
                    // fold the split into the run, in split order
                    float mn = Math.max(bigM, m);
                    float a = bigM == Float.NEGATIVE_INFINITY ? 0f : exp2(bigM - mn), b = exp2(m - mn);
                    bigL = Math.fma(bigL, a, l * b);
                    for (int d = 0; d < hd; d++) {
                        acc[d] = Math.fma(acc[d], a, o[d] * b);
                    }
                    bigM = mn;
                }
                for (int d = 0; d < hd; d++) {
                    res[d] = acc[d] / bigL;
                }
                if (rot != null) {
                    rot.unrotate(res); // the weighted sum of rotated values, rotated back
                }
                for (int d = 0; d < hd; d++) {
                    out[qo + d] = Bf16.round(res[d]);
                }
            }
        });
    }

    /** log2(e) as the kernels round it. */
    static final float LOG2E = 1.4426950408889634f;

    /** 2^x rounded to fp32, results under the smallest normal (2^-126) zero. */
    static float exp2(float x) {
        float r = (float) StrictMath.pow(2.0, x);
        return r < Float.MIN_NORMAL ? 0f : r;
    }

    private static void scaleInto(float[] o, float alpha) {
        for (int d = 0; d < o.length; d++) {
            o[d] *= alpha;
        }
    }

    /** o += p v for a decoded V, one fused multiply-add per dim, as the bf16 path computes it. */
    private static void addScaled(float[] o, float p, float[] v) {
        int hd = o.length;
        FloatVector pv = FloatVector.broadcast(F, p);
        int d = 0;
        for (; d + L <= hd; d += L) {
            FloatVector.fromArray(F, v, d).fma(pv, FloatVector.fromArray(F, o, d)).intoArray(o, d);
        }
        for (; d < hd; d++) {
            o[d] = Math.fma(p, v[d], o[d]);
        }
    }

    /** o += p v, one fused multiply-add per dim. */
    private static void addScaled(float[] o, float p, MemorySegment seg, long vo) {
        int hd = o.length;
        FloatVector pv = FloatVector.broadcast(F, p);
        int d = 0;
        for (; d + L <= hd; d += L) {
            Bf16Vectors.load(seg, vo + 2L * d).fma(pv, FloatVector.fromArray(F, o, d)).intoArray(o, d);
        }
        for (; d < hd; d++) {
            o[d] = Math.fma(p, Bf16.toFloat(seg.get(ValueLayout.JAVA_SHORT_UNALIGNED, vo + 2L * d)), o[d]);
        }
    }
}

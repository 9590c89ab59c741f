package dev.spindle.backend.cpu;

import dev.spindle.engine.kv.BlockTable;
import dev.spindle.model.Bf16;
import jdk.incubator.vector.FloatVector;

import java.lang.foreign.MemorySegment;

import static dev.spindle.backend.cpu.Bf16Vectors.F;
import static dev.spindle.backend.cpu.Bf16Vectors.L;

/**
 * Causal GQA attention over the paged KV store, in HF's eager bf16 numerics:
 * scores {@code bf16(bf16(q.k) * bf16-scale)}, softmax in fp32 rounded to bf16,
 * {@code bf16(P.V)} with fp32 accumulation. Each (row, head) is computed alone, over
 * positions 0..p in order, so a decode row equals the same row in any window.
 */
final class PagedAttention {
    private final Parallel parallel;

    PagedAttention(Parallel parallel) {
        this.parallel = parallel;
    }

    /**
     * @param q        (rows, heads, headDim) roped queries, bf16-valued; this window's rows start at {@code firstRow}
     * @param out      (rows, heads, headDim) attention output, bf16-valued, written for this window's rows
     * @param start    position of the window's first row; K/V for positions [0, start + n) are in the store
     */
    void apply(float[] q, int firstRow, int n, int start, int heads, int kvHeads, CpuKvStore kv, BlockTable table, int slot, float[] out) {
        int hd = kv.headDim();
        int group = heads / kvHeads;
        float scale = (float) Math.pow(hd, -0.5);
        MemorySegment seg = kv.data();
        parallel.forRange(n * heads, 1, (i0, i1) -> {
            float[] scratch = new float[L];
            float[] scores = new float[start + n];
            float[] acc = new float[hd];
            for (int i = i0; i < i1; i++) {
                int r = i / heads;
                int h = i % heads;
                int p = start + r;
                int kvh = h / group;
                int qo = ((firstRow + r) * heads + h) * hd;
                float max = Float.NEGATIVE_INFINITY;
                for (int t = 0; t <= p; t++) {
                    float s = MatMul.dot(q, qo, hd, seg, kv.offset(table, slot, 0, t, kvh), scratch);
                    s = Bf16.round(Bf16.round(s) * scale);
                    scores[t] = s;
                    max = Math.max(max, s);
                }
                float sum = 0f;
                for (int t = 0; t <= p; t++) {
                    float e = (float) StrictMath.exp(scores[t] - max);
                    scores[t] = e;
                    sum += e;
                }
                java.util.Arrays.fill(acc, 0f);
                for (int t = 0; t <= p; t++) {
                    float pt = Bf16.round(scores[t] / sum);
                    long vo = kv.offset(table, slot, 1, t, kvh);
                    FloatVector pv = FloatVector.broadcast(F, pt);
                    int d = 0;
                    for (; d + L <= hd; d += L) {
                        Bf16Vectors.load(seg, vo + 2L * d).fma(pv, FloatVector.fromArray(F, acc, d)).intoArray(acc, d);
                    }
                    for (; d < hd; d++) {
                        acc[d] = Math.fma(pt, Bf16.toFloat(seg.get(java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED, vo + 2L * d)), acc[d]);
                    }
                }
                for (int d = 0; d < hd; d++) {
                    out[qo + d] = Bf16.round(acc[d]);
                }
            }
        });
    }
}

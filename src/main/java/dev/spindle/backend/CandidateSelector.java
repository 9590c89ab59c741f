package dev.spindle.backend;

import dev.spindle.model.Bf16;
import dev.spindle.sample.Sampler;
import dev.spindle.step.DraftHead.Sampling;
import dev.spindle.step.Proposal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * DFlash2's candidate selector on the host: the walk that picks each draft among its row's K best
 * tokens by the row's logit plus a low-rank pair term with its predecessor. The CPU head runs it
 * whole; the CUDA head walks on the device (draft_head.cu's selector_walk, greedy and sampled, tested
 * against this) and comes here only where the head's top-k or rank exceed that kernel's limits.
 */
public final class CandidateSelector {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private CandidateSelector() {
    }

    /**
     * The selector's walk given each row's logits and its hidden projection ({@code proj}: drafts x rank, bf16 values),
     * greedy or sampled (CpuDraftHead's selectorWalk); shared by the CUDA head, which computes the logits and projections there.
     */
    public static Proposal walk(float[][] logits, float[] proj, int rank, int k, MemorySegment pred, MemorySegment succ,
                                                         int anchor, Sampling sampling) {
        int drafts = logits.length;
        int[] tokens = new int[drafts];
        float[][] q = sampling == null ? null : new float[drafts][];
        int prev = anchor;
        for (int r = 0; r < drafts; r++) {
            int[] cand = topK(logits[r], k);
            float[] scores = new float[cand.length];
            float[] mixed = new float[rank];
            for (int i = 0; i < rank; i++) {
                mixed[i] = Bf16.round(Bf16.toFloat(pred.get(BF16, 2 * ((long) prev * rank + i))) * proj[r * rank + i]);
            }
            int best = -1;
            float bestScore = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < cand.length; j++) {
                float dot = 0;
                for (int i = 0; i < rank; i++) {
                    dot = Math.fma(mixed[i], Bf16.toFloat(succ.get(BF16, 2 * ((long) cand[j] * rank + i))), dot);
                }
                float score = Bf16.round(logits[r][cand[j]] + Bf16.round(dot));
                scores[j] = score;
                if (best < 0 || score > bestScore) {
                    best = j;
                    bestScore = score;
                }
            }
            if (sampling != null) {
                double t = sampling.params().temperature();
                double sum = 0;
                double[] e = new double[cand.length];
                for (int j = 0; j < cand.length; j++) {
                    e[j] = Math.exp((scores[j] - bestScore) / t);
                    sum += e[j];
                }
                q[r] = new float[logits[r].length];
                for (int j = 0; j < cand.length; j++) {
                    q[r][cand[j]] = (float) (e[j] / sum);
                }
                prev = Sampler.drawFrom(q[r], sampling.rng());
            } else {
                prev = cand[best];
            }
            tokens[r] = prev;
        }
        return new Proposal(tokens, q);
    }

    /** The k best ids of a row, best first (ties: lower id first). */
    public static int[] topK(float[] row, int k) {
        int n = Math.min(k, row.length);
        int[] best = new int[n];
        Arrays.fill(best, -1);
        for (int id = 0; id < row.length; id++) {
            float v = row[id];
            int at = n;
            while (at > 0 && (best[at - 1] < 0 || v > row[best[at - 1]])) {
                at--;
            }
            if (at < n) {
                System.arraycopy(best, at, best, at + 1, n - at - 1);
                best[at] = id;
            }
        }
        return best;
    }
}

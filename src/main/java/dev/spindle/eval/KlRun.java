package dev.spindle.eval;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.step.ForwardPass;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Teacher-forced comparison of a configuration against a baseline on the same backend: every corpus sequence runs
 * through both passes in the same windows, and at every position the full-vocabulary KL(baseline ‖ candidate) of the
 * next-token distributions, whether their top-1 tokens agree, and each one's negative log-likelihood of the sequence's
 * own next token are taken. Windows of {@code chunk} tokens go through each pass in turn, so only one window's logits
 * are held at a time.
 *
 * <p>The thinking-stop mass (exllamav3's model cards report it beside the KL, band [0.97, 1.03]): at every position inside
 * a think block (its last {@code <think>} or {@code </think>} token so far is {@code <think>}), the probability each side
 * gives {@code </think>}; the ratio candidate over baseline of their sums. Off 1, the lossy configuration would end its
 * thinking sooner (above) or later (below) than the release.
 */
public final class KlRun {
    /** One category's figures: KL mean, 99th percentile and max over its positions, top-1 agreement, each side's mean NLL. */
    public record Summary(int sequences, int positions, double meanKl, double p99Kl, double maxKl, double top1Agreement,
                          double baselineNll, double candidateNll, int thinkingPositions, double thinkingStopRatio) {
    }

    /** The ids of {@code <think>} and {@code </think>} (-1 where the tokenizer has none: no thinking-stop mass). */
    public record ThinkTokens(int open, int close) {
        public static final ThinkTokens NONE = new ThinkTokens(-1, -1);
    }

    /** The HF fp32 reference's distance to each side over its teacher-forced positions (mean KL(fp32 ‖ side), top-1 agreement). */
    public record HfDistance(int positions, double baselineKl, double baselineTop1, double candidateKl, double candidateTop1) {
    }

    /** A reference sequence with HF's fp32 logits at each of its positions. */
    public record HfReference(int[] ids, float[][] fp32Logits) {
    }

    private final ForwardPass baseline, candidate;
    private final BlockPool basePool, candPool;
    private final int chunk;

    public KlRun(ForwardPass baseline, ForwardPass candidate, int chunk) {
        if (baseline.config().vocabSize() != candidate.config().vocabSize()) {
            throw new IllegalArgumentException("the two passes have vocabularies of " + baseline.config().vocabSize() + " and "
                    + candidate.config().vocabSize());
        }
        this.baseline = baseline;
        this.candidate = candidate;
        this.basePool = new BlockPool(baseline.kvCapacity());
        this.candPool = new BlockPool(candidate.kvCapacity());
        this.chunk = Math.max(1, chunk);
    }

    /** Every entry scored; the summaries by category in the corpus's order, then {@code all}. */
    public Map<String, Summary> run(List<KlCorpus.Entry> corpus, int maxTokens, Consumer<String> progress) {
        return run(corpus, maxTokens, ThinkTokens.NONE, progress);
    }

    /** As above, with the thinking-stop mass of think blocks delimited by {@code think}. */
    public Map<String, Summary> run(List<KlCorpus.Entry> corpus, int maxTokens, ThinkTokens think, Consumer<String> progress) {
        Map<String, Acc> by = new LinkedHashMap<>();
        Acc all = new Acc();
        for (KlCorpus.Entry e : corpus) {
            int[] ids = e.ids().length > maxTokens ? Arrays.copyOf(e.ids(), maxTokens) : e.ids();
            Acc acc = by.computeIfAbsent(e.category(), c -> new Acc());
            acc.sequences++;
            all.sequences++;
            boolean[] thinking = thinking(ids, think);
            forEachRow(ids, (p, base, cand) -> {
                double[] lb = Divergence.logSoftmax(base), lc = Divergence.logSoftmax(cand); // once a row: the vocabulary is wide
                double kl = Divergence.kl(lb, lc);
                boolean agree = Divergence.argmax(base) == Divergence.argmax(cand);
                double nb = p + 1 < ids.length ? -lb[ids[p + 1]] : Double.NaN, nc = p + 1 < ids.length ? -lc[ids[p + 1]] : Double.NaN;
                acc.add(kl, agree, nb, nc);
                all.add(kl, agree, nb, nc);
                if (thinking[p]) {
                    double sb = Math.exp(lb[think.close()]), sc = Math.exp(lc[think.close()]);
                    acc.stop(sb, sc);
                    all.stop(sb, sc);
                }
            });
            progress.accept(e.category() + " " + e.id() + ": " + ids.length + " tokens");
        }
        Map<String, Summary> out = new LinkedHashMap<>();
        by.forEach((c, a) -> out.put(c, a.summary()));
        out.put("all", all.summary());
        return out;
    }

    /** The HF fp32 reference against both sides. */
    public HfDistance hf(HfReference ref) {
        double kb = 0, kc = 0;
        int tb = 0, tc = 0, n = ref.fp32Logits().length;
        float[][] base = new float[n][], cand = new float[n][];
        forEachRow(Arrays.copyOf(ref.ids(), n), (p, b, c) -> {
            base[p] = b;
            cand[p] = c;
        });
        for (int p = 0; p < n; p++) {
            float[] hf = ref.fp32Logits()[p];
            kb += Divergence.kl(hf, base[p]);
            kc += Divergence.kl(hf, cand[p]);
            tb += Divergence.argmax(hf) == Divergence.argmax(base[p]) ? 1 : 0;
            tc += Divergence.argmax(hf) == Divergence.argmax(cand[p]) ? 1 : 0;
        }
        return new HfDistance(n, kb / n, tb / (double) n, kc / n, tc / (double) n);
    }

    /** Which positions of ids lie inside a think block: the last of {@code <think>} / {@code </think>} at or before them is the first. */
    static boolean[] thinking(int[] ids, ThinkTokens think) {
        boolean[] in = new boolean[ids.length];
        boolean open = false;
        for (int p = 0; p < ids.length; p++) {
            if (think.open() >= 0 && ids[p] == think.open()) {
                open = true;
            } else if (think.close() >= 0 && ids[p] == think.close()) {
                open = false;
            }
            in[p] = open && think.close() >= 0;
        }
        return in;
    }

    private interface RowPair {
        void accept(int position, float[] baseline, float[] candidate);
    }

    private void forEachRow(int[] ids, RowPair each) {
        BlockTable tb = new BlockTable(basePool), tc = new BlockTable(candPool);
        try {
            for (int from = 0; from < ids.length; from += chunk) {
                int[] window = Arrays.copyOfRange(ids, from, Math.min(ids.length, from + chunk));
                float[][] b = SoloWindow.run(baseline, window, tb, true);
                float[][] c = SoloWindow.run(candidate, window, tc, true);
                for (int r = 0; r < window.length; r++) {
                    each.accept(from + r, b[r], c[r]);
                }
            }
        } finally {
            tb.release();
            tc.release();
        }
    }

    private static final class Acc {
        int sequences, agree, nllCount, thinking;
        final List<Double> kls = new ArrayList<>();
        double nllBase, nllCand, stopBase, stopCand;

        void stop(double base, double cand) {
            thinking++;
            stopBase += base;
            stopCand += cand;
        }

        void add(double kl, boolean top1, double nb, double nc) {
            kls.add(kl);
            agree += top1 ? 1 : 0;
            if (!Double.isNaN(nb)) {
                nllBase += nb;
                nllCand += nc;
                nllCount++;
            }
        }

        Summary summary() {
            double[] v = kls.stream().mapToDouble(Double::doubleValue).sorted().toArray();
            int n = v.length;
            double mean = Arrays.stream(v).sum() / Math.max(1, n);
            double p99 = n == 0 ? 0 : v[Math.min(n - 1, (int) Math.ceil(0.99 * n) - 1)];
            return new Summary(sequences, n, mean, p99, n == 0 ? 0 : v[n - 1], agree / (double) Math.max(1, n),
                    nllBase / Math.max(1, nllCount), nllCand / Math.max(1, nllCount), thinking, thinking == 0 ? Double.NaN : stopCand / stopBase);
        }
    }
}

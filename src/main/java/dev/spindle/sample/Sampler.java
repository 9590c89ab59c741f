package dev.spindle.sample;

import dev.spindle.sample.SamplingParams;

import java.util.Arrays;
import java.util.Map;
import java.util.random.RandomGenerator;

/**
 * Chooses the next token from a row of logits: logit bias, repetition / presence /
 * frequency penalties (over the tokens seen so far), then greedy or temperature
 * sampling through top-k, top-p and min-p. The random draw comes from the sequence's
 * own generator, so a seeded request gives the same tokens alone or in a batch.
 */
public final class Sampler {
    private Sampler() {
    }

    /** The sampled token and, if asked, logprobs from the model's own distribution (before sampling transforms). */
    public record Choice(int token, double logprob, int[] topIds, double[] topLogprobs) {
    }

    /**
     * @param counts how often each token id occurs in the sequence so far (prompt and output)
     * @param outputCounts how often each id occurs in the output so far (presence/frequency penalties apply to these)
     */
    public static Choice sample(float[] raw, SamplingParams p, int[] counts, int[] outputCounts, RandomGenerator rng) {
        float[] logits = adjusted(raw, p, counts, outputCounts);
        int token = p.temperature() == 0 ? argmax(logits) : draw(logits, p, rng);
        return withLogprobs(raw, token, p.logprobs());
    }

    /** The logits after logit bias and penalties: what greedy takes the argmax of and sampling draws from. */
    private static float[] adjusted(float[] raw, SamplingParams p, int[] counts, int[] outputCounts) {
        float[] logits = raw.clone();
        for (Map.Entry<Integer, Double> b : p.logitBias().entrySet()) {
            if (b.getKey() >= 0 && b.getKey() < logits.length) {
                logits[b.getKey()] += b.getValue().floatValue();
            }
        }
        if (p.repetitionPenalty() != 1 || p.presencePenalty() != 0 || p.frequencyPenalty() != 0) {
            for (int id = 0; id < logits.length; id++) {
                if (counts[id] > 0 && p.repetitionPenalty() != 1) {
                    logits[id] = logits[id] > 0 ? (float) (logits[id] / p.repetitionPenalty()) : (float) (logits[id] * p.repetitionPenalty());
                }
                if (outputCounts[id] > 0) {
                    logits[id] -= (float) (p.presencePenalty() + p.frequencyPenalty() * outputCounts[id]);
                }
            }
        }
        return logits;
    }

    /**
     * A verified draft token: the token to emit and whether it is the draft (accepted) or a
     * correction drawn after rejecting it.
     */
    public record Verdict(Choice choice, boolean accepted) {
    }

    /**
     * Verifies one position against a deterministic proposer (its q is one-hot at {@code draft}): the token is drawn
     * exactly as {@link #sample} draws it, from the same generator, and the draft is accepted when it is that token. This
     * is speculative sampling's rule for a one-hot q (Leviathan et al. 2023, Chen et al. 2023): the draft is accepted with
     * probability p(draft), and a rejection's token is distributed as p without the draft, renormalised. Drawing it this
     * way also takes one uniform per emitted token, as plain decoding does, so a seeded request gives the same tokens
     * drafted as plain. Greedy (temperature 0) accepts exactly plain greedy's token.
     */
    public static Verdict verify(float[] raw, SamplingParams p, int[] counts, int[] outputCounts, RandomGenerator rng, int draft) {
        return verify(raw, p, counts, outputCounts, rng, draft, null);
    }

    /**
     * Speculative sampling of one position against the proposer's distribution {@code q} (over the
     * vocabulary, or a prefix of it; null: one-hot at {@code draft}, as above): the draft, drawn from q,
     * is accepted with probability min(1, p(draft) / q(draft)); otherwise the token is drawn from
     * norm(max(0, p - q)) (p itself where that is all zero, i.e. p = q). The emitted token is
     * distributed as p. Greedy ignores q: it accepts exactly plain greedy's token.
     */
    public static Verdict verify(float[] raw, SamplingParams p, int[] counts, int[] outputCounts, RandomGenerator rng, int draft, float[] q) {
        if (q != null && p.temperature() > 0) {
            return verifyAgainst(raw, p, counts, outputCounts, rng, draft, q);
        }
        Choice c = sample(raw, p, counts, outputCounts, rng);
        return new Verdict(c, c.token() == draft);
    }

    /** The largest logit's index, the first among equals (as torch.argmax and HF greedy). */
    public static int argmax(float[] logits) {
        int best = 0;
        for (int i = 1; i < logits.length; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        return best;
    }

    /**
     * The vocabulary in sampling order: logit descending, ties by lower id first. Sorted as primitive
     * keys (the logit's order bits inverted above the id): about ten times faster than sorting boxed
     * indices with a comparator at a 166,912-token vocabulary.
     */
    static int[] order(float[] logits) {
        int n = logits.length;
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) {
            keys[i] = key(logits, i);
        }
        Arrays.sort(keys);
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = (int) keys[i];
        }
        return order;
    }

    /** Token {@code i}'s sort key: ascending keys are logits descending, ties by lower id. */
    private static long key(float[] logits, int i) {
        float v = logits[i] == 0f ? 0f : logits[i]; // -0 ties with +0, as the != comparison has it
        int bits = Float.floatToIntBits(v);
        long ordered = bits < 0 ? ~bits & 0xFFFFFFFFL : (bits | 0x80000000L) & 0xFFFFFFFFL; // ascending in v
        return (((0xFFFFFFFFL - ordered) << 32) | i) ^ Long.MIN_VALUE; // unsigned order as signed
    }

    /**
     * The first {@code k} entries of {@link #order}, without sorting the whole vocabulary: a bounded
     * max-heap of keys (O(n log k)); at 166,912 tokens and top-k 20 about fifty times faster.
     */
    static int[] topOrder(float[] logits, int k) {
        int n = logits.length;
        if (k >= n / 8) {
            return Arrays.copyOf(order(logits), k);
        }
        long[] heap = new long[k]; // max-heap: heap[0] is the largest key kept
        int size = 0;
        for (int i = 0; i < n; i++) {
            long key = key(logits, i);
            if (size < k) {
                int c = size++;
                while (c > 0 && heap[(c - 1) >> 1] < key) {
                    heap[c] = heap[(c - 1) >> 1];
                    c = (c - 1) >> 1;
                }
                heap[c] = key;
            } else if (key < heap[0]) {
                int c = 0;
                while (true) {
                    int l = 2 * c + 1, r = l + 1, big = c;
                    long bigKey = key;
                    if (l < k && heap[l] > bigKey) {
                        big = l;
                        bigKey = heap[l];
                    }
                    if (r < k && heap[r] > bigKey) {
                        big = r;
                    }
                    if (big == c) {
                        break;
                    }
                    heap[c] = heap[big];
                    c = big;
                }
                heap[c] = key;
            }
        }
        Arrays.sort(heap, 0, size);
        int[] order = new int[size];
        for (int i = 0; i < size; i++) {
            order[i] = (int) heap[i];
        }
        return order;
    }

    private static Verdict verifyAgainst(float[] raw, SamplingParams p, int[] counts, int[] outputCounts, RandomGenerator rng, int draft, float[] q) {
        Distribution d = distribution(adjusted(raw, p, counts, outputCounts), p);
        double[] pd = new double[raw.length];
        for (int i = 0; i < d.keep; i++) {
            pd[d.order[i]] = d.probs[i] / d.total;
        }
        double qd = draft < q.length ? q[draft] : 0;
        if (qd > 0 && rng.nextDouble() < Math.min(1, pd[draft] / qd)) {
            return new Verdict(withLogprobs(raw, draft, p.logprobs()), true);
        }
        double rest = 0;
        double[] r = new double[raw.length];
        for (int x = 0; x < raw.length; x++) {
            r[x] = Math.max(0, pd[x] - (x < q.length ? q[x] : 0));
            rest += r[x];
        }
        if (rest <= 0) { // p = q: the residual is empty, draw from p
            r = pd;
            rest = 1;
        }
        double u = rng.nextDouble() * rest;
        int token = -1;
        for (int x = 0; x < r.length; x++) {
            if (r[x] > 0) {
                token = x;
                u -= r[x];
                if (u < 0) {
                    break;
                }
            }
        }
        return new Verdict(withLogprobs(raw, token, p.logprobs()), false);
    }

    /**
     * What sampling draws from: the first {@code keep} tokens of the sampling order and their
     * unnormalised probabilities, summing to {@code total}.
     */
    private record Distribution(int[] order, double[] probs, int keep, double total) {
    }

    /**
     * The distribution plain sampling draws from with these settings (temperature, top-k, top-p, min-p; no bias or
     * penalties), over the whole vocabulary: what a proposer that samples its drafts with the request's settings
     * hands the verifier as q.
     */
    public static float[] probabilities(float[] logits, SamplingParams p) {
        Distribution d = distribution(logits, p);
        float[] q = new float[logits.length];
        for (int i = 0; i < d.keep; i++) {
            q[d.order[i]] = (float) (d.probs[i] / d.total);
        }
        return q;
    }

    /** A token drawn from q (inverse CDF over ids; the last id with mass when rounding leaves some over). */
    public static int drawFrom(float[] q, RandomGenerator rng) {
        double u = rng.nextDouble();
        int last = -1;
        for (int i = 0; i < q.length; i++) {
            if (q[i] > 0) {
                last = i;
                u -= q[i];
                if (u < 0) {
                    return i;
                }
            }
        }
        return last;
    }

    private static Distribution distribution(float[] logits, SamplingParams p) {
        int n = logits.length;
        int keep = p.topK() > 0 ? Math.min(p.topK(), n) : n;
        int[] order = keep < n ? topOrder(logits, keep) : order(logits);
        double max = logits[order[0]];
        double[] probs = new double[keep];
        double sum = 0;
        for (int i = 0; i < keep; i++) {
            probs[i] = Math.exp((logits[order[i]] - max) / p.temperature());
            sum += probs[i];
        }
        for (int i = 0; i < keep; i++) {
            probs[i] /= sum;
        }
        if (p.minP() > 0) {
            double floor = probs[0] * p.minP();
            int k = 1;
            while (k < keep && probs[k] >= floor) {
                k++;
            }
            keep = k;
        }
        if (p.topP() < 1) {
            double cum = 0;
            int k = 0;
            while (k < keep) {
                cum += probs[k++];
                if (cum >= p.topP()) {
                    break;
                }
            }
            keep = k;
        }
        double total = 0;
        for (int i = 0; i < keep; i++) {
            total += probs[i];
        }
        return new Distribution(order, probs, keep, total);
    }

    private static int draw(float[] logits, SamplingParams p, RandomGenerator rng) {
        Distribution d = distribution(logits, p);
        double u = rng.nextDouble() * d.total;
        for (int i = 0; i < d.keep; i++) {
            u -= d.probs[i];
            if (u < 0) {
                return d.order[i];
            }
        }
        return d.order[d.keep - 1];
    }

    /** The logprob of {@code token} under {@code logits} and the top alternatives (scoring a given token). */
    public static Choice scoreOf(float[] logits, int token, int top) {
        return withLogprobs(logits, token, Math.max(0, top));
    }

    private static Choice withLogprobs(float[] raw, int token, int top) {
        if (top < 0) {
            return new Choice(token, Double.NaN, new int[0], new double[0]);
        }
        double max = Double.NEGATIVE_INFINITY;
        for (float f : raw) {
            max = Math.max(max, f);
        }
        double sum = 0;
        for (float f : raw) {
            sum += Math.exp(f - max);
        }
        double lse = max + Math.log(sum);
        int[] ids = new int[top];
        double[] lps = new double[top];
        boolean[] taken = new boolean[raw.length];
        for (int k = 0; k < top; k++) {
            int best = -1;
            for (int i = 0; i < raw.length; i++) {
                if (!taken[i] && (best < 0 || raw[i] > raw[best])) {
                    best = i;
                }
            }
            taken[best] = true;
            ids[k] = best;
            lps[k] = raw[best] - lse;
        }
        return new Choice(token, raw[token] - lse, ids, lps);
    }
}

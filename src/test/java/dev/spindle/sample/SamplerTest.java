package dev.spindle.sample;

import dev.spindle.sample.SamplingParams;
import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The host sampling rule, piece by piece, and its distribution. */
public class SamplerTest {
    static SamplingParams params(double t, int topK, double topP, double minP) {
        return new SamplingParams(t, topK, topP, minP, null, 0, 0, 1, Map.of(), 1, Set.of(), true, -1, null, -1);
    }

    /** A generator whose next double is u (the sampler takes exactly one per temperature draw). */
    public static RandomGenerator fixed(double u) {
        return new RandomGenerator() {
            @Override
            public long nextLong() {
                return (long) (u * 0x1.0p53) << 11;
            }

            @Override
            public double nextDouble() {
                return u;
            }
        };
    }

    static int draw(float[] logits, SamplingParams p, double u) {
        return Sampler.sample(logits, p, new int[logits.length], new int[logits.length], fixed(u)).token();
    }

    @Test
    void theOrderIsLogitDescendingThenLowerIdFirst() {
        float[] l = {1f, 3f, -2f, 3f, 0f, -0f, Float.NEGATIVE_INFINITY, -2.5f, 1e-30f};
        assertArrayEquals(new int[]{1, 3, 0, 8, 4, 5, 2, 7, 6}, Sampler.order(l));
        Random r = new Random(3);
        float[] big = new float[5000];
        for (int i = 0; i < big.length; i++) {
            big[i] = (float) Math.round(r.nextGaussian() * 8) / 4; // many ties
        }
        int[] o = Sampler.order(big);
        for (int i = 1; i < o.length; i++) {
            float a = big[o[i - 1]], b = big[o[i]];
            assertTrue(a > b || (a == b && o[i - 1] < o[i]), "position " + i);
        }
    }

    @Test
    void greedyIsTheFirstAmongEqualsAfterBiasAndPenalties() {
        float[] l = {1f, 4f, 4f, 2f};
        assertEquals(1, Sampler.argmax(l));
        assertEquals(1, draw(l, params(0, 0, 1, 0), 0.99));
        // a bias moves the argmax; repetition divides a seen positive logit; presence subtracts for output tokens
        SamplingParams biased = new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(3, 2.5), 1, Set.of(), true, -1, null, -1);
        assertEquals(3, draw(l, biased, 0.5));
        SamplingParams repeat = new SamplingParams(0, 0, 1, 0, null, 0, 0, 2, Map.of(), 1, Set.of(), true, -1, null, -1);
        int[] seen = {0, 1, 1, 0};
        assertEquals(1, Sampler.sample(l, repeat, seen, new int[4], fixed(0.5)).token(), "4 / 2 = 2 ties token 3's 2: the first wins");
    }

    @Test
    void penaltiesFollowTheirDefinitions() {
        float[] l = {3f, -1f, 2.9f, 0f};
        // repetition 2: seen positive logits halved, seen negative doubled
        SamplingParams rep = new SamplingParams(0, 0, 1, 0, null, 0, 0, 2, Map.of(), 1, Set.of(), true, 0, null, -1);
        Sampler.Choice c = Sampler.sample(l, rep, new int[]{1, 1, 0, 0}, new int[4], fixed(0));
        assertEquals(2, c.token(), "3 / 2 = 1.5 falls below 2.9");
        // presence 0.5 + frequency 0.1 x count on output tokens only
        SamplingParams pf = new SamplingParams(0, 0, 1, 0, null, 0.5, 0.1, 1, Map.of(), 1, Set.of(), true, -1, null, -1);
        assertEquals(0, Sampler.sample(l, pf, new int[]{1, 0, 0, 0}, new int[4], fixed(0)).token(), "prompt tokens are not penalised");
        assertEquals(2, Sampler.sample(l, pf, new int[]{1, 0, 0, 0}, new int[]{1, 0, 0, 0}, fixed(0)).token(), "3 - 0.6 = 2.4 < 2.9");
    }

    @Test
    void topKTopPAndMinPCutTheOrderedList() {
        float[] l = {0f, 2f, 1f, 2f, -1f};
        // order: 1, 3, 2, 0, 4; top-k 1 always gives the first
        for (double u : new double[]{0, 0.5, 0.999}) {
            assertEquals(1, draw(l, params(1, 1, 1, 0), u));
            assertEquals(1, draw(l, params(1, 0, 1e-9, 0), u), "a tiny top-p keeps the first only");
        }
        // min-p 1 keeps the tokens tied with the first: ids 1 and 3, half each
        assertEquals(1, draw(l, params(1, 0, 1, 1), 0.49));
        assertEquals(3, draw(l, params(1, 0, 1, 1), 0.51));
        // inverse CDF over the kept, ordered tokens
        double[] w = new double[5];
        double sum = 0;
        int[] order = {1, 3, 2, 0, 4};
        for (int i = 0; i < 5; i++) {
            w[i] = Math.exp(l[order[i]] - 2);
            sum += w[i];
        }
        double cum = 0;
        for (int i = 0; i < 5; i++) {
            double mid = (cum + w[i] / 2) / sum;
            assertEquals(order[i], draw(l, params(1, 0, 1, 0), mid), "u = " + mid);
            cum += w[i];
        }
    }

    @Test
    void temperatureSamplingFollowsTheSoftmax() {
        float[] l = {1f, 0f, 2f, -1f};
        double t = 0.7;
        int n = 40_000;
        int[] counts = new int[4];
        SplittableRandom rng = new SplittableRandom(11);
        SamplingParams p = params(t, 0, 1, 0);
        for (int i = 0; i < n; i++) {
            counts[Sampler.sample(l, p, new int[4], new int[4], rng).token()]++;
        }
        double z = 0;
        for (float x : l) {
            z += Math.exp(x / t);
        }
        for (int i = 0; i < 4; i++) {
            double prob = Math.exp(l[i] / t) / z, sd = Math.sqrt(n * prob * (1 - prob));
            assertTrue(Math.abs(counts[i] - n * prob) < 4 * sd, "token " + i + ": " + counts[i] + " vs " + n * prob);
        }
    }

    @Test
    void logprobsAreTheModelsLogSoftmaxWithSortedAlternatives() {
        float[] l = {1f, 3f, 2f, 3f};
        SamplingParams p = new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), 1, Set.of(), true, 3, null, -1);
        Sampler.Choice c = Sampler.sample(l, p, new int[4], new int[4], fixed(0));
        double lse = 3 + Math.log(Math.exp(-2) + 1 + Math.exp(-1) + 1);
        assertEquals(1, c.token());
        assertEquals(3 - lse, c.logprob(), 1e-12);
        assertArrayEquals(new int[]{1, 3, 2}, c.topIds());
        assertEquals(2 - lse, c.topLogprobs()[2], 1e-12);
    }
}

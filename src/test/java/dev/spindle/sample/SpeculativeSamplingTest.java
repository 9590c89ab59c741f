package dev.spindle.sample;

import dev.spindle.sample.SamplingParams;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The verifier of speculative sampling emits tokens distributed exactly as plain sampling's p,
 * whatever the draft: a chi-square test over 40,000 seeded draws per case, on an 8-token
 * vocabulary, at the model's recommended temperatures with top-k, top-p and min-p. The same test
 * fails a verifier with the classic bug (resampling from p instead of the residual after a
 * rejection), so it has the power to see a wrong distribution.
 */
class SpeculativeSamplingTest {
    static final float[] LOGITS = {2.0f, 1.5f, 1.25f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
    static final int DRAWS = 40_000;
    /** The chi-square 0.999 quantiles for 1..7 degrees of freedom. */
    static final double[] CRITICAL = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};

    interface Verifier {
        int token(float[] logits, SamplingParams p, RandomGenerator rng, int draft);
    }

    static SamplingParams params(double t, int topK, double topP, double minP) {
        return new SamplingParams(t, topK, topP, minP, null, 0, 0, 1, Map.of(), 16, Set.of(), true, -1, null, -1);
    }

    /** Plain sampling's distribution, computed directly: softmax at T over the logits in order, then top-k, min-p, top-p. */
    static double[] expected(float[] logits, SamplingParams p) {
        Integer[] order = new Integer[logits.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Float.compare(logits[b], logits[a]));
        int keep = p.topK() > 0 ? Math.min(p.topK(), logits.length) : logits.length;
        double[] pr = new double[keep];
        double sum = 0;
        for (int i = 0; i < keep; i++) {
            pr[i] = Math.exp((logits[order[i]] - logits[order[0]]) / p.temperature());
            sum += pr[i];
        }
        for (int i = 0; i < keep; i++) {
            pr[i] /= sum;
        }
        int k = 1;
        while (k < keep && pr[k] >= pr[0] * p.minP()) {
            k++;
        }
        keep = p.minP() > 0 ? k : keep;
        double cum = 0;
        k = 0;
        while (k < keep) {
            cum += pr[k++];
            if (cum >= p.topP()) {
                break;
            }
        }
        keep = p.topP() < 1 ? k : keep;
        double total = 0;
        for (int i = 0; i < keep; i++) {
            total += pr[i];
        }
        double[] out = new double[logits.length];
        for (int i = 0; i < keep; i++) {
            out[order[i]] = pr[i] / total;
        }
        return out;
    }

    /** Pearson's statistic of the verifier's tokens against p over the support; fails on a token outside it. */
    static double chiSquare(Verifier v, SamplingParams p, int draft, long seed) {
        double[] e = expected(LOGITS, p);
        long[] counts = new long[LOGITS.length];
        for (int i = 0; i < DRAWS; i++) {
            counts[v.token(LOGITS, p, new SplittableRandom(seed * 1_000_003L + i), draft)]++;
        }
        double chi = 0;
        for (int t = 0; t < LOGITS.length; t++) {
            if (e[t] == 0) {
                assertEquals(0, counts[t], "token " + t + " is outside p's support but was emitted");
                continue;
            }
            double want = e[t] * DRAWS;
            chi += (counts[t] - want) * (counts[t] - want) / want;
        }
        return chi;
    }

    static int support(SamplingParams p) {
        return (int) Arrays.stream(expected(LOGITS, p)).filter(x -> x > 0).count();
    }

    static final Verifier SPINDLE = (l, p, rng, d) -> Sampler.verify(l, p, null, null, rng, d).choice().token();

    /** The classic bug: after rejecting the draft, draw again from p instead of from norm(max(0, p - q)). */
    static final Verifier RESAMPLES_FROM_P = (l, p, rng, d) -> {
        Sampler.Verdict v = Sampler.verify(l, p, null, null, rng, d);
        return v.accepted() ? d : Sampler.sample(l, p, null, null, rng).token();
    };

    @Test
    void emittedTokensAreDistributedAsPlainSamplingWhateverTheDraft() {
        SamplingParams[] cases = {params(0.6, 20, 0.95, 0), params(1.0, 20, 0.95, 0), params(1.0, 0, 1, 0), params(0.6, 5, 0.9, 0.05),
                params(1.0, 3, 1, 0)};
        StringBuilder report = new StringBuilder();
        long seed = 1;
        for (SamplingParams p : cases) {
            int df = support(p) - 1;
            // the likeliest token, a middle one, and one outside p's support (never accepted: the residual is p itself)
            for (int draft : new int[]{0, 2, 7}) {
                double chi = chiSquare(SPINDLE, p, draft, seed++);
                report.append(String.format("T %.1f top-k %d top-p %.2f min-p %.2f draft %d: chi2 %.1f (df %d); ", p.temperature(), p.topK(), p.topP(),
                        p.minP(), draft, chi, df));
                assertTrue(df == 0 || chi < CRITICAL[df], "the verifier's tokens are not distributed as p: " + report);
            }
        }
        System.out.println("[speculative sampling] " + report);
    }

    @Test
    void aVerifierThatResamplesFromPIsCaught() {
        SamplingParams p = params(1.0, 20, 0.95, 0);
        double chi = chiSquare(RESAMPLES_FROM_P, p, 0, 99);
        assertTrue(chi > CRITICAL[support(p) - 1], "the broken verifier should fail the test, chi2 " + chi);
    }

    @Test
    void greedyAcceptsExactlyPlainGreedysToken() {
        SamplingParams g = params(0, 0, 1, 0);
        for (int draft = 0; draft < LOGITS.length; draft++) {
            Sampler.Verdict v = Sampler.verify(LOGITS, g, null, null, new SplittableRandom(1), draft);
            assertEquals(0, v.choice().token());
            assertEquals(draft == 0, v.accepted());
        }
    }

    /** A proposer that samples its drafts from its own q: accept with min(1, p/q), else draw from norm(max(0, p - q)). */
    @Test
    void draftsDrawnFromTheProposersQAreVerifiedToP() {
        float[] q = {0.05f, 0.1f, 0.3f, 0.2f, 0.05f, 0.1f, 0.1f, 0.1f};
        Verifier withQ = (l, p, rng, ignored) -> Sampler.verify(l, p, null, null, rng, drawFrom(q, rng), q).choice().token();
        // min(1, p/q) acceptance but, on rejection, a fresh draw from p instead of the residual: biased towards the drafts
        Verifier resamples = (l, p, rng, ignored) -> {
            int d = drawFrom(q, rng);
            Sampler.Verdict v = Sampler.verify(l, p, null, null, rng, d, q);
            return v.accepted() ? d : Sampler.sample(l, p, null, null, rng).token();
        };
        StringBuilder report = new StringBuilder();
        long seed = 1000;
        for (SamplingParams p : new SamplingParams[]{params(0.6, 20, 0.95, 0), params(1.0, 0, 1, 0), params(1.0, 5, 0.9, 0.05)}) {
            int df = support(p) - 1;
            double chi = chiSquare(withQ, p, -1, seed++);
            report.append(String.format("T %.1f top-k %d top-p %.2f: chi2 %.1f (df %d); ", p.temperature(), p.topK(), p.topP(), chi, df));
            assertTrue(chi < CRITICAL[df], "verified against q, the tokens are not distributed as p: " + report);
        }
        double broken = chiSquare(resamples, params(1.0, 0, 1, 0), -1, 77);
        assertTrue(broken > CRITICAL[LOGITS.length - 1], "resampling from p after a rejection should fail the test, chi2 " + broken);
        // knowing q accepts more of its drafts than treating each as one-hot (which is also exact, but wastes drafts)
        SamplingParams p = params(1.0, 0, 1, 0);
        int withQAccepted = 0, oneHotAccepted = 0;
        for (int i = 0; i < DRAWS; i++) {
            SplittableRandom r1 = new SplittableRandom(i), r2 = new SplittableRandom(i);
            withQAccepted += Sampler.verify(LOGITS, p, null, null, r1, drawFrom(q, r1), q).accepted() ? 1 : 0;
            oneHotAccepted += Sampler.verify(LOGITS, p, null, null, r2, drawFrom(q, r2)).accepted() ? 1 : 0;
        }
        assertTrue(withQAccepted > oneHotAccepted, withQAccepted + " vs " + oneHotAccepted);
        // a q on a few candidates only (DFlash2's sampled walk draws among the target head's top-K): zero elsewhere in p's support
        float[] walk = {0f, 0.5f, 0.3f, 0f, 0.2f, 0f, 0f, 0f};
        Verifier fromWalk = (l, pp, rng, ignored) -> Sampler.verify(l, pp, null, null, rng, Sampler.drawFrom(walk, rng), walk).choice().token();
        for (SamplingParams pp : new SamplingParams[]{params(0.6, 20, 0.95, 0), params(1.0, 0, 1, 0)}) {
            int df = support(pp) - 1;
            double chi = chiSquare(fromWalk, pp, -1, seed++);
            report.append(String.format("walk-like q, T %.1f: chi2 %.1f (df %d); ", pp.temperature(), chi, df));
            assertTrue(chi < CRITICAL[df], "verified against a q on few candidates, the tokens are not distributed as p: " + report);
        }
        System.out.printf("[speculative sampling, q] %sresampling from p: chi2 %.0f; accepted with q %d, as one-hot %d of %d%n", report, broken,
                withQAccepted, oneHotAccepted, DRAWS);
    }

    static int drawFrom(float[] q, RandomGenerator rng) {
        double u = rng.nextDouble();
        for (int i = 0; i < q.length; i++) {
            u -= q[i];
            if (u < 0) {
                return i;
            }
        }
        return q.length - 1;
    }
}

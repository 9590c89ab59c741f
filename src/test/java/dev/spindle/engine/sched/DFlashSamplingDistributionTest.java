package dev.spindle.engine.sched;

import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.engine.speculative.Proposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.SamplingParams;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Speculative sampling's distribution in the engine, with a DFlash proposer whose drafts are sampled and verified
 * against their q (`--dflash-sampled-drafts`: DFlash's rows drawn from the head's softmax, DFlash2's sampled selector
 * walk): the replies' tokens at each drafted position are distributed as plain sampling's, by a two-sample chi-square
 * over many seeded requests of one prompt (random ids: on chat text the target is nearly deterministic) on the bundled target with its trained heads, at temperature 1 (the whole
 * distribution). Deterministic drafts need no such test: with them a seeded request's tokens equal plain sampling's
 * bit for bit (SpeculativeEngineTest). The same test tells plain sampling at T 1.0 from T 0.8 at this size: it can fail.
 * On random ids the heads' drafts are nearly always rejected (acceptance under 1%), so this checks the wiring of q and the
 * residual draw after a rejection in the engine; SpeculativeSamplingTest checks the rule itself, acceptance included.
 */
class DFlashSamplingDistributionTest {
    static final int REQUESTS = 400, TOKENS = 4;

    /** Plain sampling's replies at T 1.0 and 0.8, shared by both heads' cases. */
    static List<int[]> plain, colder;

    @BeforeAll
    static void load() {
        SpeculativeEngineTest.loadTarget();
        try (CpuForwardPass pass = SpeculativeEngineTest.targetPass()) {
            plain = replies(pass, Speculation.NONE, 1.0, 0);
            colder = replies(pass, Speculation.NONE, 0.8, 2 * REQUESTS);
        }
    }

    @AfterAll
    static void close() {
        SpeculativeEngineTest.target.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"models/spindle-chat-dflash", "models/spindle-chat-dflash2"})
    void sampledDraftsVerifiedAgainstTheirQEmitPlainSamplingsDistribution(String dir) {
        long t0 = System.nanoTime();
        try (CpuForwardPass pass = SpeculativeEngineTest.targetPass(); java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            Speculation spec = SpeculativeEngineTest.dflash(Path.of(dir), 7, arena, true);
            List<int[]> drafted;
            double acceptance;
            try (Proposer proposer = spec.proposer()) {
                SpeculativeEngineTest.Result r = run(pass, spec, 1.0, REQUESTS);
                drafted = tokens(r);
                acceptance = r.spec().acceptanceRate();
            }
            StringBuilder report = new StringBuilder();
            double worstPower = 0;
            for (int pos = 1; pos < TOKENS; pos++) {
                double[] same = chiSquare(plain, drafted, pos), other = chiSquare(plain, colder, pos);
                report.append(String.format("position %d: drafted chi2 %.1f (df %d, bound %.1f), T 0.8 chi2 %.1f (df %d, bound %.1f); ", pos, same[0],
                        (int) same[1], critical((int) same[1]), other[0], (int) other[1], critical((int) other[1])));
                assertTrue(same[1] == 0 || same[0] < critical((int) same[1]), "drafted tokens are not distributed as plain sampling's: " + report);
                worstPower = Math.max(worstPower, other[0] / critical((int) other[1]));
            }
            System.out.printf("[speculative sampling, engine] %s sampled drafts (acceptance %.3f), %d requests each: %s%.1f s%n",
                    Path.of(dir).getFileName(), acceptance, REQUESTS, report, (System.nanoTime() - t0) / 1e9);
            assertTrue(worstPower > 1, "the test should tell T 1.0 from T 0.8 at this size: " + report);
        }
    }

    private static List<int[]> replies(CpuForwardPass pass, Speculation spec, double t, int seed0) {
        return tokens(run(pass, spec, t, seed0));
    }

    private static SpeculativeEngineTest.Result run(CpuForwardPass pass, Speculation spec, double t, int seed0) {
        // random ids: the bundled target, nearly deterministic on chat text, spreads its next-token distributions on them
        int[] prompt = new java.util.SplittableRandom(7).ints(24, 0, SpeculativeEngineTest.target.config().vocabSize()).toArray();
        List<int[]> ps = Collections.nCopies(REQUESTS, prompt);
        return SpeculativeEngineTest.run(pass, spec, ps,
                i -> new SamplingParams(t, 0, 1, 0, (long) seed0 + i, 0, 0, 1, Map.of(), TOKENS, Set.of(), true, -1, null, -1));
    }

    private static List<int[]> tokens(SpeculativeEngineTest.Result r) {
        List<int[]> out = new ArrayList<>();
        for (String sig : r.signatures()) {
            out.add(Arrays.stream(sig.split(",")).filter(x -> !x.isEmpty()).mapToInt(x -> Integer.parseInt(x.substring(0, x.indexOf('/')))).toArray());
        }
        return out;
    }

    /** The two-sample chi-square of the tokens at position pos, and its degrees of freedom: tokens seen under 10 times in both pooled. */
    static double[] chiSquare(List<int[]> a, List<int[]> b, int pos) {
        Map<Integer, int[]> counts = new HashMap<>();
        for (int s = 0; s < 2; s++) {
            for (int[] reply : s == 0 ? a : b) {
                counts.computeIfAbsent(reply[pos], x -> new int[2])[s]++;
            }
        }
        List<int[]> bins = new ArrayList<>();
        int[] rare = new int[2];
        for (int[] c : counts.values()) {
            if (c[0] + c[1] < 10) {
                rare[0] += c[0];
                rare[1] += c[1];
            } else {
                bins.add(c);
            }
        }
        if (rare[0] + rare[1] > 0) {
            bins.add(rare);
        }
        double chi = 0;
        for (int[] c : bins) {
            chi += (double) (c[0] - c[1]) * (c[0] - c[1]) / (c[0] + c[1]);
        }
        return new double[]{chi, bins.size() - 1};
    }

    /** The chi-square 0.999 quantile with df degrees of freedom (Wilson and Hilferty's approximation). */
    static double critical(int df) {
        double z = 3.0902, h = 2.0 / (9 * df);
        return df * Math.pow(1 - h + z * Math.sqrt(h), 3);
    }
}

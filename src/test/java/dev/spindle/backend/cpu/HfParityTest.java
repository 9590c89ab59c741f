package dev.spindle.backend.cpu;

import dev.spindle.Fixture;
import dev.spindle.backend.TestSteps;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.step.ForwardPass;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CPU reference against HF transformers on the committed fixtures, by the fidelity gate
 * (docs/ARCHITECTURE.md, "Attention numerics"): teacher-forced, Spindle is no further from HF's fp32
 * logits than HF's own bf16 paths (eager and sdpa) are, in KL and in top-1; greedy continuations equal
 * HF bf16 sdpa's up to the first close call.
 */
public class HfParityTest {
    static List<String> fixtures() {
        return Fixture.NAMES;
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void teacherForcedLogitsAreAsCloseToFp32AsHfsOwnBf16Paths(String name) {
        try (Fixture f = new Fixture(name); CpuForwardPass cpu = f.cpu()) {
            Parity p = Parity.teacherForced(f, cpu, false);
            p.print(name + " (cpu)");
            p.assertGate(name);
        }
    }

    /**
     * Greedy tokens must equal HF bf16 sdpa's up to the first step where either side's top-2
     * margin is below two bf16 ulps of its top logit. Why two: logits are bf16 values, and a
     * different fp32 accumulation order can move each of the two top logits by one rounding step
     * in opposite directions, so a margin under two steps is within bf16 resolution and either
     * token is a correct greedy choice.
     */
    @ParameterizedTest
    @MethodSource("fixtures")
    void greedyContinuationMatchesHf(String name) {
        try (Fixture f = new Fixture(name); CpuForwardPass cpu = f.cpu()) {
            checkGreedy(f, cpu, name);
        }
    }

    /** The greedy rule above, for any backend's pass over the fixture's weights. */
    public static void checkGreedy(Fixture f, ForwardPass cpu, String name) {
        checkGreedy(f, cpu, name, 16);
    }

    /** @param minDecisive the fewest decisive tokens (over all prompts) for the check to count */
    public static void checkGreedy(Fixture f, ForwardPass cpu, String name, int minDecisive) {
        float[][] margin = f.matrix("greedy_sdpa_margin");
        float[][] top = f.matrix("greedy_sdpa_top");
        int compared = 0, total = 0;
        for (int i = 0; i < f.prompts.size(); i++) {
            int[] hf = f.greedySdpa.get(i);
            Greedy ours = Parity.greedy(cpu, f.prompts.get(i), hf.length);
            int n = decisive(hf, margin[i], top[i], ours);
            int agree = agreement(hf, ours.tokens());
            System.out.printf("[greedy] %s prompt %d: %d of %d tokens equal HF bf16 sdpa's; both margins are decisive for the first %d%n",
                    name, i, agree, hf.length, n);
            assertTrue(agree >= n, name + " prompt " + i + ": diverged at token " + agree + " before the first close call at " + n);
            compared += n;
            total += hf.length;
        }
        System.out.printf("[greedy] %s: %d of %d tokens were checked against HF (decisive margins)%n", name, compared, total);
        assertTrue(compared >= minDecisive, name + ": only " + compared + " of " + total + " greedy tokens were decisive; the check would be too weak");
    }

    /**
     * How many leading greedy steps are decisive: HF's margin (its top1 - top2 with top logit {@code hfTop})
     * and ours both at least two bf16 ulps. Tokens are not looked at: a side that chose another token at a
     * decisive step fails the caller's comparison there.
     */
    public static int decisive(int[] hf, float[] hfMargin, float[] hfTop, Greedy ours) {
        int n = 0;
        while (n < hf.length && hfMargin[n] >= 2 * bf16Ulp(hfTop[n]) && ours.margins()[n] >= 2 * bf16Ulp(ours.tops()[n])) {
            n++;
        }
        return n;
    }

    /** The length of the common prefix. */
    public static int agreement(int[] a, int[] b) {
        int agree = 0;
        while (agree < a.length && agree < b.length && a[agree] == b[agree]) {
            agree++;
        }
        return agree;
    }

    public static float bf16Ulp(float v) {
        int exp = Math.getExponent(v);
        return (float) Math.scalb(1.0, exp - 7);
    }

    /** A greedy continuation with each step's top-2 margin and top logit. */
    public record Greedy(int[] tokens, float[] margins, float[] tops) {
    }

    /**
     * Teacher-forced figures against HF's fp32 logits (the truth): Spindle's KL and top-1, and those of
     * HF's own bf16 paths, eager and sdpa, on the same positions.
     */
    public record Parity(double kl, double top1, double klEager, double top1Eager, double klSdpa, double top1Sdpa, int positions) {
        /** The gate's KL bound: 1.1 times the larger of HF's bf16 paths' KL, plus 1e-6. */
        public double maxKl() {
            return 1.1 * Math.max(klEager, klSdpa) + 1e-6;
        }

        /** The gate's top-1 floor: half a point below the lower of HF's bf16 paths'. */
        public double minTop1() {
            return Math.min(top1Eager, top1Sdpa) - 0.005;
        }

        public boolean passes() {
            return kl <= maxKl() && top1 >= minTop1();
        }

        public void assertGate(String name) {
            assertTrue(kl <= maxKl(), name + ": KL(HF fp32 || Spindle) " + kl + " > " + maxKl() + " (HF bf16 eager " + klEager + ", sdpa " + klSdpa + ")");
            assertTrue(top1 >= minTop1(), name + ": top-1 agreement with HF fp32 " + top1 + " < " + minTop1() + " (HF bf16 eager " + top1Eager + ", sdpa " + top1Sdpa + ")");
        }

        public void print(String label) {
            System.out.printf("[parity] %s, %d positions: KL(HF fp32 || Spindle) = %.3e nats, top-1 %.4f; HF bf16 eager %.3e / %.4f, HF bf16 sdpa %.3e / %.4f;"
                    + " gate KL <= %.3e, top-1 >= %.4f%n", label, positions, kl, top1, klEager, top1Eager, klSdpa, top1Sdpa, maxKl(), minTop1());
        }

        /** @param rowByRow true: feed the prompt one token at a time (decode steps) */
        public static Parity teacherForced(Fixture f, ForwardPass cpu, boolean rowByRow) {
            List<float[][]> ours = new java.util.ArrayList<>();
            for (int[] prompt : f.prompts) {
                ours.add(logits(cpu, prompt, rowByRow));
            }
            return of(f::matrix, ours);
        }

        /** The figures of {@code ours} (sequence i's logits, row per position) against references logits_{f32,bf16,sdpa}_i. */
        public static Parity of(java.util.function.Function<String, float[][]> f, List<float[][]> ours) {
            double kl = 0, klE = 0, klS = 0;
            int agree = 0, agreeE = 0, agreeS = 0, n = 0;
            for (int i = 0; i < ours.size(); i++) {
                float[][] truth = f.apply("logits_f32_" + i), eager = f.apply("logits_bf16_" + i), sdpa = f.apply("logits_sdpa_" + i);
                assertEquals(truth.length, ours.get(i).length);
                for (int p = 0; p < truth.length; p++) {
                    float[] o = ours.get(i)[p];
                    int top = Stats.argmax(truth[p]);
                    kl += Stats.kl(truth[p], o);
                    klE += Stats.kl(truth[p], eager[p]);
                    klS += Stats.kl(truth[p], sdpa[p]);
                    agree += Stats.argmax(o) == top ? 1 : 0;
                    agreeE += Stats.argmax(eager[p]) == top ? 1 : 0;
                    agreeS += Stats.argmax(sdpa[p]) == top ? 1 : 0;
                    n++;
                }
            }
            return new Parity(kl / n, (double) agree / n, klE / n, (double) agreeE / n, klS / n, (double) agreeS / n, n);
        }

        public static float[][] logits(ForwardPass cpu, int[] prompt, boolean rowByRow) {
            BlockTable t = new BlockTable(TestSteps.pool(cpu));
            try {
                if (!rowByRow) {
                    return SoloWindow.run(cpu, prompt, t, true);
                }
                float[][] out = new float[prompt.length][];
                for (int p = 0; p < prompt.length; p++) {
                    out[p] = SoloWindow.run(cpu, new int[]{prompt[p]}, t, false)[0];
                }
                return out;
            } finally {
                t.release();
            }
        }

        public static Greedy greedy(ForwardPass cpu, int[] prompt, int steps) {
            BlockTable t = new BlockTable(TestSteps.pool(cpu));
            try {
                int[] out = new int[steps];
                float[] margins = new float[steps], tops = new float[steps];
                float[] logits = SoloWindow.run(cpu, prompt, t, false)[0];
                for (int s = 0; s < steps; s++) {
                    out[s] = Stats.argmax(logits);
                    float second = Float.NEGATIVE_INFINITY;
                    for (int v = 0; v < logits.length; v++) {
                        if (v != out[s]) {
                            second = Math.max(second, logits[v]);
                        }
                    }
                    tops[s] = logits[out[s]];
                    margins[s] = tops[s] - second;
                    if (s + 1 < steps) {
                        logits = SoloWindow.run(cpu, new int[]{out[s]}, t, false)[0];
                    }
                }
                return new Greedy(out, margins, tops);
            } finally {
                t.release();
            }
        }
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.Fixture;
import dev.spindle.engine.kv.BlockTable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CPU reference against HF transformers (bf16, eager attention) on the committed
 * fixtures: teacher-forced KL and top-1, and greedy continuations.
 */
public class HfParityTest {
    public static final double MAX_KL = 1e-4;
    public static final double MIN_TOP1 = 0.99;

    static List<String> fixtures() {
        return Fixture.NAMES;
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void teacherForcedLogitsMatchHf(String name) {
        try (Fixture f = new Fixture(name); CpuForwardPass cpu = f.cpu()) {
            Parity p = Parity.teacherForced(f, cpu, false);
            System.out.printf("[parity] %s: teacher-forced KL(HF bf16 || Spindle) = %.3e nats, top-1 agreement %.4f over %d positions;"
                    + " for scale KL(HF bf16 || HF fp32) = %.3e, KL(HF fp32 || Spindle) = %.3e%n",
                    name, p.klBf16(), p.top1(), p.positions(), p.klHfBf16VsF32(), p.klF32());
            assertTrue(p.klBf16() <= MAX_KL, name + ": KL " + p.klBf16() + " > " + MAX_KL);
            assertTrue(p.top1() >= MIN_TOP1, name + ": top-1 agreement " + p.top1() + " < " + MIN_TOP1);
        }
    }

    /**
     * Greedy tokens must equal HF's up to the first step where HF's own top-2 margin is
     * below two bf16 ulps of its top logit. Why two: logits are bf16 values, and a
     * different fp32 accumulation order can move each of the two top logits by one
     * rounding step in opposite directions, so a margin under two steps is within
     * bf16 resolution and either token is a correct greedy choice.
     */
    @ParameterizedTest
    @MethodSource("fixtures")
    void greedyContinuationMatchesHf(String name) {
        try (Fixture f = new Fixture(name); CpuForwardPass cpu = f.cpu()) {
            checkGreedy(f, cpu, name);
        }
    }

    /** The greedy rule above, for any backend's pass over the fixture's weights. */
    public static void checkGreedy(Fixture f, dev.spindle.backend.ForwardPass cpu, String name) {
        checkGreedy(f, cpu, name, 16);
    }

    /** @param minDecisive the fewest decisive tokens (over all prompts) for the check to count */
    public static void checkGreedy(Fixture f, dev.spindle.backend.ForwardPass cpu, String name, int minDecisive) {
        {
            float[][] margin = f.matrix("greedy_margin");
            float[][] top = f.matrix("greedy_top");
            int compared = 0, total = 0;
            for (int i = 0; i < f.prompts.size(); i++) {
                int[] hf = f.greedy.get(i);
                int[] ours = Parity.greedy(cpu, f.prompts.get(i), hf.length);
                int decisive = 0;
                while (decisive < hf.length && margin[i][decisive] >= 2 * bf16Ulp(top[i][decisive])) {
                    decisive++;
                }
                int agree = 0;
                while (agree < hf.length && hf[agree] == ours[agree]) {
                    agree++;
                }
                System.out.printf("[greedy] %s prompt %d: %d of %d tokens equal HF's; HF's margin is decisive for the first %d%n",
                        name, i, agree, hf.length, decisive);
                assertTrue(agree >= decisive, name + " prompt " + i + ": diverged at token " + agree + " before HF's first close call at " + decisive);
                compared += decisive;
                total += hf.length;
            }
            System.out.printf("[greedy] %s: %d of %d tokens were checked against HF (decisive margins)%n", name, compared, total);
            assertTrue(compared >= minDecisive, name + ": only " + compared + " of " + total + " greedy tokens were decisive; the check would be too weak");
        }
    }

    public static float bf16Ulp(float v) {
        int exp = Math.getExponent(v);
        return (float) Math.scalb(1.0, exp - 7);
    }

    /** Teacher-forced comparison figures. */
    public record Parity(double klBf16, double klF32, double klHfBf16VsF32, double top1, int positions) {
        /** @param rowByRow true: feed the prompt one token at a time (decode steps) */
        public static Parity teacherForced(Fixture f, dev.spindle.backend.ForwardPass cpu, boolean rowByRow) {
            double kl = 0, kl32 = 0, klHf = 0;
            int agree = 0, n = 0;
            for (int i = 0; i < f.prompts.size(); i++) {
                int[] prompt = f.prompts.get(i);
                float[][] ours = logits(cpu, prompt, rowByRow);
                float[][] hf = f.matrix("logits_bf16_" + i);
                float[][] hf32 = f.matrix("logits_f32_" + i);
                assertEquals(prompt.length, hf.length);
                for (int p = 0; p < prompt.length; p++) {
                    kl += Stats.kl(hf[p], ours[p]);
                    kl32 += Stats.kl(hf32[p], ours[p]);
                    klHf += Stats.kl(hf[p], hf32[p]);
                    agree += Stats.argmax(hf[p]) == Stats.argmax(ours[p]) ? 1 : 0;
                    n++;
                }
            }
            return new Parity(kl / n, kl32 / n, klHf / n, (double) agree / n, n);
        }

        public static float[][] logits(dev.spindle.backend.ForwardPass cpu, int[] prompt, boolean rowByRow) {
            BlockTable t = new BlockTable(dev.spindle.backend.TestSteps.pool(cpu));
            try {
                if (!rowByRow) {
                    return dev.spindle.backend.ForwardPass.run(cpu, prompt, t, true);
                }
                float[][] out = new float[prompt.length][];
                for (int p = 0; p < prompt.length; p++) {
                    out[p] = dev.spindle.backend.ForwardPass.run(cpu, new int[]{prompt[p]}, t, false)[0];
                }
                return out;
            } finally {
                t.release();
            }
        }

        public static int[] greedy(dev.spindle.backend.ForwardPass cpu, int[] prompt, int steps) {
            BlockTable t = new BlockTable(dev.spindle.backend.TestSteps.pool(cpu));
            try {
                int[] out = new int[steps];
                float[] logits = dev.spindle.backend.ForwardPass.run(cpu, prompt, t, false)[0];
                for (int s = 0; s < steps; s++) {
                    out[s] = Stats.argmax(logits);
                    if (s + 1 < steps) {
                        logits = dev.spindle.backend.ForwardPass.run(cpu, new int[]{out[s]}, t, false)[0];
                    }
                }
                return out;
            } finally {
                t.release();
            }
        }
    }
}

package dev.spindle.sample;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/** The top-k selection is the full order's first k, ties (and -0 against +0, and -infinity) included. */
class SamplerOrderPropertyTest {
    /** 1-3000 logits: mostly in [-20, 20] to two decimals (ties among them too), often tied small values, a tenth -infinity. */
    static float[] logits(RandomGenerator r) {
        float[] a = new float[Trials.between(r, 1, 3000)];
        for (int i = 0; i < a.length; i++) {
            a[i] = switch (Trials.frequency(r, 6, 3, 1)) {
                case 0 -> Math.round(Trials.between(r, -20.0, 20.0) * 100) / 100f;
                case 1 -> Trials.oneOf(r, 0f, -0f, 1f, 2.5f, -3f); // ties
                default -> Float.NEGATIVE_INFINITY;
            };
        }
        return a;
    }

    record TopK(float[] logits, int k) {
    }

    @Test
    void topKIsThePrefixOfTheFullOrder() {
        Trials.forAll(300, r -> new TopK(logits(r), Trials.between(r, 1, 64)), c -> {
            int keep = Math.min(c.k(), c.logits().length);
            assertArrayEquals(Arrays.copyOf(Sampler.order(c.logits()), keep), Sampler.topOrder(c.logits(), keep));
        });
    }

    @Test
    void atAFullVocabulary() {
        Trials.forAll(20, r -> new FullVocabulary(Trials.between(r, 1, 50), r.nextLong()), c -> atAFullVocabulary(c.k(), c.seed()));
    }

    /** k, and the seed the vocabulary's logits are drawn from. */
    record FullVocabulary(int k, long seed) {
    }

    static void atAFullVocabulary(int k, long seed) {
        java.util.Random r = new java.util.Random(seed);
        float[] logits = new float[166912];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = List.of(0f, 1f, -1f).get(r.nextInt(3)) + (r.nextInt(10) == 0 ? (float) r.nextGaussian() : 0f);
        }
        assertArrayEquals(Arrays.copyOf(Sampler.order(logits), k), Sampler.topOrder(logits, k));
    }
}

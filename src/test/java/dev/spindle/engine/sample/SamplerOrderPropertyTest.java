package dev.spindle.engine.sample;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/** The top-k selection is the full order's first k, ties (and -0 against +0, and -infinity) included. */
class SamplerOrderPropertyTest {
    @Provide
    Arbitrary<float[]> logits() {
        Arbitrary<Float> value = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(6, Arbitraries.floats().between(-20, 20)),
                net.jqwik.api.Tuple.of(3, Arbitraries.of(0f, -0f, 1f, 2.5f, -3f)), // ties
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Float.NEGATIVE_INFINITY)));
        return value.list().ofMinSize(1).ofMaxSize(3000).map(l -> {
            float[] a = new float[l.size()];
            for (int i = 0; i < a.length; i++) {
                a[i] = l.get(i);
            }
            return a;
        });
    }

    @Property(tries = 300)
    void topKIsThePrefixOfTheFullOrder(@ForAll("logits") float[] logits, @ForAll @IntRange(min = 1, max = 64) int k) {
        int keep = Math.min(k, logits.length);
        assertArrayEquals(Arrays.copyOf(Sampler.order(logits), keep), Sampler.topOrder(logits, keep));
    }

    @Property(tries = 20)
    void atAFullVocabulary(@ForAll @IntRange(min = 1, max = 50) int k, @ForAll long seed) {
        java.util.Random r = new java.util.Random(seed);
        float[] logits = new float[166912];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = List.of(0f, 1f, -1f).get(r.nextInt(3)) + (r.nextInt(10) == 0 ? (float) r.nextGaussian() : 0f);
        }
        assertArrayEquals(Arrays.copyOf(Sampler.order(logits), k), Sampler.topOrder(logits, k));
    }
}

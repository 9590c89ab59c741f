package dev.spindle.sample;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

class LookaheadRandomTest {
    /** Any mix of peeks and draws yields the source's own doubles, in its order: peeking consumes nothing. */
    @Test
    void peeksAndDrawsFollowTheSourcesStream() {
        Trials.forAll(200, r -> new Peeks(r.nextLong(), Trials.listOf(r, 0, 12, g -> Trials.between(g, 0, 9))),
                LookaheadRandomTest::peeksAndDrawsFollowTheSourcesStream);
    }

    /** The source's seed, and how many doubles each round peeks at (it then draws half of them and one more). */
    record Peeks(long seed, List<Integer> peeks) {
    }

    static void peeksAndDrawsFollowTheSourcesStream(Peeks p) {
        long seed = p.seed();
        List<Integer> peeks = p.peeks();
        SplittableRandom plain = new SplittableRandom(seed);
        LookaheadRandom ahead = new LookaheadRandom(new SplittableRandom(seed));
        List<Double> drawn = new ArrayList<>(), expected = new ArrayList<>();
        for (int n : peeks) {
            double[] seen = ahead.peekDoubles(n);
            for (int i = 0; i < n / 2; i++) { // consume half of what was peeked: it must be what was seen
                double d = ahead.nextDouble();
                assertEquals(seen[i], d);
                drawn.add(d);
            }
            drawn.add(ahead.nextDouble());
        }
        for (int i = 0; i < drawn.size(); i++) {
            expected.add(plain.nextDouble());
        }
        assertEquals(expected, drawn);
    }
}

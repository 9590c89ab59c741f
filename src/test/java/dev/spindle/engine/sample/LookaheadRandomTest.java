package dev.spindle.engine.sample;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

class LookaheadRandomTest {
    /** Any mix of peeks and draws yields the source's own doubles, in its order: peeking consumes nothing. */
    @Property(tries = 200)
    void peeksAndDrawsFollowTheSourcesStream(@ForAll long seed, @ForAll @Size(max = 12) List<@IntRange(min = 0, max = 9) Integer> peeks) {
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

package dev.spindle.backend.cuda;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** How a row bucket picks among cuBLASLt and the linear_rows variants from their timings (no GPU needed). */
class LinearChoiceTest {
    @Test
    void nearEqualCandidatesGiveTheFirstWhicheverTimedFaster() {
        // o_proj's 32-row bucket on 2026-12-05: two variants within a percent, the faster one differing between starts
        assertEquals(1, Linear.steadyChoice(List.of(12.0, 10.00, 10.08), Linear.CHOICE_TOLERANCE));
        assertEquals(1, Linear.steadyChoice(List.of(12.0, 10.08, 10.00), Linear.CHOICE_TOLERANCE));
        // a clear winner is taken wherever it stands
        assertEquals(2, Linear.steadyChoice(List.of(12.0, 11.0, 10.0), Linear.CHOICE_TOLERANCE));
        assertEquals(0, Linear.steadyChoice(List.of(10.0, 11.0, 12.0), Linear.CHOICE_TOLERANCE));
        // no tolerance: the fastest, the first of equals
        assertEquals(2, Linear.steadyChoice(List.of(10.1, 10.05, 10.0), 0));
        assertEquals(1, Linear.steadyChoice(List.of(10.1, 10.0, 10.0), 0));
    }

    @Property
    void theChoiceIsWithinToleranceOfTheFastestAndNoEarlierOneIs(@ForAll @Size(min = 1, max = 12) List<@DoubleRange(min = 1, max = 1000) Double> micros,
                                                                @ForAll @DoubleRange(min = 0, max = 0.1) double tolerance) {
        int i = Linear.steadyChoice(micros, tolerance);
        double best = micros.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        assertTrue(micros.get(i) <= best * (1 + tolerance), "the choice is within tolerance of the fastest");
        for (int j = 0; j < i; j++) {
            assertTrue(micros.get(j) > best * (1 + tolerance), "candidate " + j + " comes first and is within tolerance");
        }
    }

    @Property
    void aCandidateFasterThanEveryOtherByMoreThanTheToleranceIsChosenAndUnitsDoNotMatter(
            @ForAll @Size(min = 1, max = 8) List<@DoubleRange(min = 10, max = 100) Double> micros, @ForAll @DoubleRange(min = 0, max = 1) double where,
            @ForAll @DoubleRange(min = 0.01, max = 1000) double unit) {
        int at = (int) Math.min(micros.size() - 1, Math.floor(where * micros.size()));
        List<Double> times = new java.util.ArrayList<>(micros);
        double others = times.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        times.set(at, others / (1 + 2 * Linear.CHOICE_TOLERANCE));
        assertEquals(at, Linear.steadyChoice(times, Linear.CHOICE_TOLERANCE));
        List<Double> scaled = times.stream().map(t -> t * unit).toList();
        assertEquals(Linear.steadyChoice(times, Linear.CHOICE_TOLERANCE), Linear.steadyChoice(scaled, Linear.CHOICE_TOLERANCE));
    }
}

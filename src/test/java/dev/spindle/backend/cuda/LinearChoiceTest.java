package dev.spindle.backend.cuda;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.random.RandomGenerator;

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

    /** A double in [min, max] to two decimals, so that equal timings and a timing exactly at the tolerance's edge come up. */
    static double hundredths(RandomGenerator r, double min, double max) {
        return Math.round(Trials.between(r, min, max) * 100) / 100.0;
    }

    /** 1 to maxSize timings; one in eight repeats an earlier one, for ties between candidates. */
    static List<Double> timings(RandomGenerator r, int maxSize, double min, double max) {
        List<Double> out = new ArrayList<>();
        for (int n = Trials.between(r, 1, maxSize); out.size() < n; ) {
            out.add(!out.isEmpty() && r.nextInt(8) == 0 ? Trials.oneOf(r, out) : hundredths(r, min, max));
        }
        return out;
    }

    record Timings(List<Double> micros, double tolerance) {
    }

    @Test
    void theChoiceIsWithinToleranceOfTheFastestAndNoEarlierOneIs() {
        Trials.forAll(1000, r -> new Timings(timings(r, 12, 1, 1000), hundredths(r, 0, 0.1)),
                t -> theChoiceIsWithinToleranceOfTheFastestAndNoEarlierOneIs(t.micros(), t.tolerance()));
    }

    static void theChoiceIsWithinToleranceOfTheFastestAndNoEarlierOneIs(List<Double> micros, double tolerance) {
        int i = Linear.steadyChoice(micros, tolerance);
        double best = micros.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        assertTrue(micros.get(i) <= best * (1 + tolerance), "the choice is within tolerance of the fastest");
        for (int j = 0; j < i; j++) {
            assertTrue(micros.get(j) > best * (1 + tolerance), "candidate " + j + " comes first and is within tolerance");
        }
    }

    /** Timings, where among them (a fraction of the list) the clear winner goes, and a unit they are all scaled by. */
    record Winner(List<Double> micros, double where, double unit) {
    }

    @Test
    void aCandidateFasterThanEveryOtherByMoreThanTheToleranceIsChosenAndUnitsDoNotMatter() {
        Trials.forAll(1000, r -> new Winner(timings(r, 8, 10, 100), hundredths(r, 0, 1), hundredths(r, 0.01, 1000)),
                w -> aCandidateFasterThanEveryOtherByMoreThanTheToleranceIsChosenAndUnitsDoNotMatter(w.micros(), w.where(), w.unit()));
    }

    static void aCandidateFasterThanEveryOtherByMoreThanTheToleranceIsChosenAndUnitsDoNotMatter(List<Double> micros, double where, double unit) {
        int at = (int) Math.min(micros.size() - 1, Math.floor(where * micros.size()));
        List<Double> times = new ArrayList<>(micros);
        double others = times.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        times.set(at, others / (1 + 2 * Linear.CHOICE_TOLERANCE));
        assertEquals(at, Linear.steadyChoice(times, Linear.CHOICE_TOLERANCE));
        List<Double> scaled = times.stream().map(t -> t * unit).toList();
        assertEquals(Linear.steadyChoice(times, Linear.CHOICE_TOLERANCE), Linear.steadyChoice(scaled, Linear.CHOICE_TOLERANCE));
    }
}

package dev.spindle.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class StepTimesTest {
    /** The bench reads the pass's sums before and after its steps: each phase keeps its own field through plus and since. */
    @Test
    void sumsAndDifferencesKeepEachPhaseApart() {
        StepTimes a = new StepTimes(1, 2, 3, 4, 5, 6, 7), b = new StepTimes(10, 20, 30, 40, 50, 60, 70);
        StepTimes sum = StepTimes.NONE.plus(a).plus(b);
        assertEquals(new StepTimes(11, 22, 33, 44, 55, 66, 77), sum);
        assertEquals(b, sum.since(a));
        assertEquals(StepTimes.NONE, sum.since(sum));
    }
}

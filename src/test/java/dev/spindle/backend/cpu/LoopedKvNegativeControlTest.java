package dev.spindle.backend.cpu;

import dev.spindle.Fixture;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Proves the parity check can fail: the looped model with both loops sharing one KV
 * slot per physical layer (wrong, yet fluent) is caught by the same thresholds that
 * the correct layout passes. Decoded row by row, so that each loop reads K/V written
 * earlier (in one window, each loop would overwrite and then read only its own).
 */
class LoopedKvNegativeControlTest {
    @Test
    void sharingKvSlotsAcrossLoopsFailsParity() {
        try (Fixture f = new Fixture("nanbeige-looped");
             CpuForwardPass right = f.cpu(KvSlots.PER_EXECUTED_LAYER);
             CpuForwardPass wrong = f.cpu(KvSlots.SHARED_ACROSS_LOOPS)) {
            HfParityTest.Parity good = HfParityTest.Parity.teacherForced(f, right, true);
            HfParityTest.Parity bad = HfParityTest.Parity.teacherForced(f, wrong, true);
            System.out.printf("[negative control] nanbeige-looped decoded row by row: per-executed-layer slots KL %.3e top-1 %.4f;"
                    + " shared slots KL %.3e top-1 %.4f (gate KL <= %.3e, top-1 >= %.4f)%n", good.kl(), good.top1(), bad.kl(), bad.top1(),
                    good.maxKl(), good.minTop1());
            assertTrue(good.passes(), "correct layout must pass");
            assertTrue(bad.kl() > good.maxKl() * 10, "shared slots must fail the KL gate clearly, got " + bad.kl());
            assertTrue(bad.top1() < good.minTop1(), "shared slots must fail the top-1 gate, got " + bad.top1());
        }
    }
}

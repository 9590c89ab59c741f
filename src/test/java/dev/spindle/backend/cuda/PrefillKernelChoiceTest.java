package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;

import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The prefill kernel rule with the kernels a GPU would load, without a GPU. */
class PrefillKernelChoiceTest {
    private static PrefillKernelChoice loading(Integer... kernels) {
        Set<Integer> set = Set.of(kernels);
        return new PrefillKernelChoice(set::contains);
    }

    @Test
    void hopperRunsTheWarpSpecialisedKernelsAndThePairsFromTheirKeys() {
        PrefillKernelChoice hopper = loading(AttentionKernels.PREFILL, AttentionKernels.PREFILL_WGMMA, AttentionKernels.PREFILL_WS_REGISTERS,
                AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, AttentionKernels.PREFILL_WS_PAIRS, AttentionKernels.PREFILL_WS_PAIRS_WIDE);
        int pairsFrom = PrefillKernelChoice.PAIRS_FROM_KEYS;
        assertEquals(AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, hopper.forKeys(0));
        assertEquals(AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, hopper.forKeys(pairsFrom - 1));
        assertEquals(AttentionKernels.PREFILL_WS_PAIRS_WIDE, hopper.forKeys(pairsFrom));
        assertEquals(AttentionKernels.PREFILL_WS_PAIRS_WIDE, hopper.forKeys(512 * 1024));
    }

    @Test
    void theTwoScoreProductPairsStandInForTheWideOne() {
        PrefillKernelChoice narrow = loading(AttentionKernels.PREFILL, AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, AttentionKernels.PREFILL_WS_PAIRS);
        assertEquals(AttentionKernels.PREFILL_WS_PAIRS, narrow.forKeys(PrefillKernelChoice.PAIRS_FROM_KEYS));
        assertEquals(AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, narrow.forKeys(PrefillKernelChoice.PAIRS_FROM_KEYS - 1));
    }

    @Test
    void eachKernelStandsInForTheOneBeforeItWhenThatDoesNotLoad() {
        // head dims without the warp-specialised kernels: wgmma on Hopper, the one-warp kernel elsewhere, at every length
        PrefillKernelChoice wgmmaOnly = loading(AttentionKernels.PREFILL, AttentionKernels.PREFILL_WGMMA);
        assertEquals(AttentionKernels.PREFILL_WGMMA, wgmmaOnly.forKeys(100));
        assertEquals(AttentionKernels.PREFILL_WGMMA, wgmmaOnly.forKeys(1 << 20));
        PrefillKernelChoice ampere = loading(AttentionKernels.PREFILL, AttentionKernels.DECODE);
        assertEquals(PrefillKernelChoice.FALLBACK, ampere.forKeys(100));
        assertEquals(PrefillKernelChoice.FALLBACK, ampere.forKeys(1 << 20));
        assertEquals(AttentionKernels.PREFILL_WS_REGISTERS, loading(AttentionKernels.PREFILL_WS_REGISTERS, AttentionKernels.PREFILL_WGMMA).forKeys(8192));
    }

    @Test
    void aForcedKernelRunsEveryStepUntilReleased() {
        PrefillKernelChoice hopper = loading(AttentionKernels.PREFILL, AttentionKernels.PREFILL_WGMMA, AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG,
                AttentionKernels.PREFILL_WS_PAIRS, AttentionKernels.PREFILL_WS_PAIRS_WIDE);
        hopper.force(AttentionKernels.PREFILL_WGMMA);
        assertEquals(AttentionKernels.PREFILL_WGMMA, hopper.forKeys(10));
        assertEquals(AttentionKernels.PREFILL_WGMMA, hopper.forKeys(1 << 20));
        hopper.force(-1);
        assertEquals(AttentionKernels.PREFILL_WS_PAIRS_WIDE, hopper.forKeys(1 << 20));
    }

    @Test
    void onlyALoadedPrefillKernelCanBeForced() {
        PrefillKernelChoice ampere = loading(AttentionKernels.PREFILL, AttentionKernels.DECODE);
        var notLoaded = assertThrows(IllegalArgumentException.class, () -> ampere.force(AttentionKernels.PREFILL_WS_PAIRS));
        assertTrue(notLoaded.getMessage().contains("not loaded"), notLoaded.getMessage());
        var notPrefill = assertThrows(IllegalArgumentException.class, () -> ampere.force(AttentionKernels.DECODE));
        assertTrue(notPrefill.getMessage().contains("not a prefill attention kernel"), notPrefill.getMessage());
        assertEquals(PrefillKernelChoice.FALLBACK, ampere.forKeys(1 << 20));
    }
}

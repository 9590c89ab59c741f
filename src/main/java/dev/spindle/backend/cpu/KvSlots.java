package dev.spindle.backend.cpu;

/** Which KV slot an executed layer writes and reads. */
public enum KvSlots {
    /** Correct: slot = layer + loop x L, so each loop attends to its own pass's K/V. */
    PER_EXECUTED_LAYER,
    /**
     * Wrong on purpose: every loop shares the layer's slot, overwriting the other loop's
     * K/V. It still emits fluent text; the parity tests use it as a negative control.
     */
    SHARED_ACROSS_LOOPS;

    int slot(int layer, int loop, int numLayers) {
        return this == PER_EXECUTED_LAYER ? layer + loop * numLayers : layer;
    }
}

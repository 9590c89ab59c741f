package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep.Window;

import java.util.List;
import java.util.function.IntPredicate;

/**
 * Which prefill attention kernel a step runs, by where its longest prefill window ends and which kernels are loaded
 * for the model's head dim on this GPU. Every prefill kernel computes the same values (the kernel contract), so the
 * choice is speed only; the bench times each (prefill_attention_kernels in its JSON) and may force one.
 */
final class PrefillKernelChoice {
    /**
     * The prefill attention kernel where Hopper's wgmma kernels are not loaded: one warp per row group, which loads on
     * every GPU (96 KiB of shared memory a block at head dim 128) and was faster than warp pairs at every length
     * measured (docs/bench/CHOICES.md).
     */
    static final int FALLBACK = AttentionKernels.PREFILL;
    /**
     * On sm_90a, the fastest loaded first, as measured on the 33B shape: the warp-specialised kernels at head dim 128,
     * else wgmma (docs/bench/CHOICES.md).
     */
    static final List<Integer> HOPPER_ORDER = List.of(AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, AttentionKernels.PREFILL_WS_REGISTERS,
            AttentionKernels.PREFILL_WGMMA);
    /**
     * Keys (the longest prefill window's end) from which a step runs a kernel of {@link #PAIRS_ORDER} where one is
     * loaded: its CTAs walk two tiles an iteration, which pays on long walks and costs on short ones; even at 4K, faster
     * from 8K (docs/bench/CHOICES.md).
     */
    static final int PAIRS_FROM_KEYS = 4096;
    /**
     * The pair kernels, the fastest first: a pair's scores as one 128-key product, then as two 64-key ones
     * (docs/bench/CHOICES.md).
     */
    static final List<Integer> PAIRS_ORDER = List.of(AttentionKernels.PREFILL_WS_PAIRS_WIDE, AttentionKernels.PREFILL_WS_PAIRS);

    /** Whether a prefill kernel is loaded for this model's head dim on this GPU. */
    private final IntPredicate loaded;
    /** -1: chosen by the step's keys; else every prefill step runs this kernel. */
    private int forced = -1;

    PrefillKernelChoice(IntPredicate loaded) {
        this.loaded = loaded;
    }

    /** The kernel a step runs whose longest prefill window ends at key {@code keys} ({@link #keysOf}). */
    int forKeys(int keys) {
        if (forced >= 0) {
            return forced;
        }
        int hopper = firstLoaded(HOPPER_ORDER, FALLBACK);
        return keys >= PAIRS_FROM_KEYS ? firstLoaded(PAIRS_ORDER, hopper) : hopper;
    }

    /** The first kernel of {@code order} that is loaded, else {@code otherwise}. */
    private int firstLoaded(List<Integer> order, int otherwise) {
        for (int kernel : order) {
            if (loaded.test(kernel)) {
                return kernel;
            }
        }
        return otherwise;
    }

    boolean loaded(int kernel) {
        return loaded.test(kernel);
    }

    /** Every prefill step runs {@code kernel} (one of {@link AttentionKernels#PREFILL_KERNELS}, loaded), or, with -1, the chosen one. */
    void force(int kernel) {
        if (kernel != -1 && !AttentionKernels.PREFILL_KERNELS.contains(kernel)) {
            throw new IllegalArgumentException("not a prefill attention kernel: " + kernel);
        }
        if (kernel != -1 && !loaded.test(kernel)) {
            throw new IllegalArgumentException("prefill attention kernel " + kernel + " is not loaded on this GPU");
        }
        forced = kernel;
    }

    /** Where a step's longest prefill window (one not run row by row: StepPlan.rowwise) ends; 0 where it has none. */
    static int keysOf(List<Window> windows) {
        int keys = 0;
        for (Window w : windows) {
            if (!StepPlan.rowwise(w.tokens().length)) {
                keys = Math.max(keys, w.start() + w.tokens().length);
            }
        }
        return keys;
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.ModelStep;

import java.util.Arrays;
import java.util.List;

/**
 * Whether a pass's paired launches ({@link PairedLinear}) pay in a whole decode step. {@link PairedLinear} picks them per
 * weight shape from that GEMM timed alone, which does not tell how it runs between its neighbours (it made one shape's
 * step faster and another's slower: docs/bench/CHOICES.md). So the pass times its own batch-1 decode steps (greedy, CUDA graphs, a 1,024-token
 * context in blocks of a pool of its own, which no request has yet: the engine's requests write their K/V before reading
 * it) both ways, alternated, and keeps the paired launches only where they are the faster by at least 1%.
 */
final class PairingChoice {
    /** Decode steps timed each way in each of {@link #ROUNDS} rounds, after one untimed step (its graph's capture). */
    static final int STEPS = 6, ROUNDS = 3, CONTEXT = 1024;

    private PairingChoice() {
    }

    /**
     * Keeps a pass's paired launches only where whole decode steps run faster with them: with CUDA graphs (what decode
     * steps run), where PairedLinear chose one for steps of up to 8 rows; off otherwise.
     */
    static void decide(CudaForwardPass gpu, boolean cudaGraphs) {
        PairedLaunches pairing = gpu.pairing;
        if (!pairing.planned()) {
            pairing.off("none chosen per shape");
        } else if (!cudaGraphs) {
            pairing.off("off (decode steps without CUDA graphs)");
        } else {
            pairing.decided(choose(gpu));
        }
    }

    /** Leaves gpu with the paired launches on or off, whichever ran the faster step; returns the line for the GEMM choices. */
    static String choose(CudaForwardPass gpu) {
        BlockPool pool = new BlockPool(gpu.kvCapacity());
        if (pool.freeBlocks() * (long) gpu.kvCapacity().blockSize() < CONTEXT + ROUNDS * 2L * (STEPS + 1) + 1) {
            gpu.probes().pairedEpilogues(false);
            return "paired launches: off (the KV pool is too small to time decode steps)";
        }
        BlockTable t = new BlockTable(pool);
        t.reserve(CONTEXT);
        t.advance(CONTEXT);
        int[] next = {3};
        Runnable step = () -> {
            t.reserve(t.tokens() + 1);
            ModelStep s = new ModelStep(List.of(new Window(new int[]{next[0]}, t.tokens(), t, ModelStep.lastRow(1), null)));
            next[0] = 3 + Math.floorMod(gpu.greedy(s)[0], 1000);
            t.advance(t.tokens() + 1);
        };
        double[] on = new double[ROUNDS], off = new double[ROUNDS];
        try {
            for (int r = 0; r < ROUNDS; r++) {
                on[r] = time(gpu, true, step);
                off[r] = time(gpu, false, step);
            }
        } finally {
            t.release();
        }
        Arrays.sort(on);
        Arrays.sort(off);
        double a = on[ROUNDS / 2], b = off[ROUNDS / 2];
        boolean pays = a < 0.99 * b;
        gpu.probes().pairedEpilogues(pays);
        return String.format(java.util.Locale.ROOT, "paired launches: %s (a batch-1 decode step at %d tokens of context %.3f ms paired, %.3f ms"
                + " as two launches each; the median of %d rounds of %d steps)", pays ? "on" : "off", CONTEXT, a * 1e3, b * 1e3, ROUNDS, STEPS);
    }

    /** Seconds per decode step with the paired launches on or off. */
    private static double time(CudaForwardPass gpu, boolean paired, Runnable step) {
        gpu.probes().pairedEpilogues(paired);
        step.run(); // the graph's capture
        long t0 = System.nanoTime();
        for (int i = 0; i < STEPS; i++) {
            step.run();
        }
        return (System.nanoTime() - t0) / 1e9 / STEPS;
    }
}

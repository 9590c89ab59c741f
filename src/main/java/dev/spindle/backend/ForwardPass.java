package dev.spindle.backend;

import dev.spindle.engine.kv.BlockPool;
import dev.spindle.engine.kv.BlockTable;
import dev.spindle.model.ModelConfig;

/**
 * A backend's forward pass over one window of one sequence. The window's tokens take
 * positions [table.tokens(), table.tokens() + n); their K/V are written through the
 * block table (blocks are reserved as needed) and the table advances past them.
 */
public interface ForwardPass extends AutoCloseable {
    ModelConfig config();

    /** The pool whose blocks the tables passed to {@link #forward} must come from. */
    BlockPool blockPool();

    /**
     * @param allLogits true: logits for every row of the window (n, vocab); false: only the last row (1, vocab)
     * @return fp32 logits holding the bf16 values HF's bf16 lm_head produces
     */
    float[][] forward(int[] tokens, BlockTable table, boolean allLogits);

    /** One sequence's part of a batched step: its next tokens, its table, and which rows need logits. */
    record Window(int[] tokens, BlockTable table, boolean allLogits, boolean wantLogits) {
    }

    /**
     * Several sequences in one step: rows of all windows share every matmul (one pass over
     * the weights), attention runs per window over its own blocks. A row's result does not
     * depend on the other windows (batch invariance).
     *
     * @return per window: its logits rows (all, last, or none when {@code wantLogits} is false)
     */
    java.util.List<float[][]> forward(java.util.List<Window> windows);

    /**
     * A token drawn on the device from a window's last logits row, by the engine's sampling rule
     * (engine.sample.Sampler) without penalties, logit bias, grammar or logprobs.
     *
     * @param temperature 0 = greedy
     * @param topK        0 = off
     * @param topP        1 = off
     * @param minP        0 = off
     * @param u           the sequence's uniform draw in [0, 1) (unused when greedy)
     */
    record Draw(double temperature, int topK, double topP, double minP, double u) {
    }

    /** True when {@link #forward(java.util.List, java.util.List, int[])} draws tokens on the device. */
    default boolean drawsOnDevice() {
        return false;
    }

    /**
     * As {@link #forward(java.util.List)}, but each window with a non-null draw (it must want the
     * logits of its last row only) gets its next token drawn on the device into {@code tokens[window]};
     * its logits stay there (an empty array is returned for it). Only backends that
     * {@link #drawsOnDevice} implement it.
     */
    default java.util.List<float[][]> forward(java.util.List<Window> windows, java.util.List<Draw> draws, int[] tokens) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " does not draw tokens on the device");
    }

    /**
     * Checks a step's windows against the model (none empty, positions within
     * max_position_embeddings), reserves their KV blocks, and returns each window's first row in
     * the step (and, last, the step's row count).
     */
    static int[] prepareWindows(ModelConfig c, java.util.List<Window> windows) {
        int[] rowStart = new int[windows.size() + 1];
        int n = 0;
        for (int i = 0; i < windows.size(); i++) {
            Window win = windows.get(i);
            if (win.tokens().length == 0) {
                throw new IllegalArgumentException("empty window");
            }
            int end = win.table().tokens() + win.tokens().length;
            if (end > c.maxPositions()) {
                throw new IllegalArgumentException("positions up to " + end + " exceed max_position_embeddings " + c.maxPositions());
            }
            rowStart[i] = n;
            n += win.tokens().length;
        }
        rowStart[windows.size()] = n;
        for (Window win : windows) {
            win.table().reserve(win.table().tokens() + win.tokens().length);
        }
        return rowStart;
    }

    @Override
    void close();
}

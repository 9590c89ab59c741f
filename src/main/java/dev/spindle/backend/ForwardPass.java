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

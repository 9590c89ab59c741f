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

    @Override
    void close();
}

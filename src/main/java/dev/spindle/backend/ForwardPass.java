package dev.spindle.backend;

import dev.spindle.engine.kv.BlockPool;
import dev.spindle.engine.kv.BlockTable;
import dev.spindle.model.ModelConfig;

import java.util.List;

/**
 * What a backend does: run one {@link ModelStep} (windows of sequences through their KV block
 * tables) and return its {@link StepOutput}. The engine owns the block pool and the tables: a
 * backend holds {@link #kvCapacity()} blocks of KV bytes, reads the tables it is given, writes the
 * K/V of each window's positions into their blocks, and never reserves, advances or frees a block.
 */
public interface ForwardPass extends AutoCloseable {
    ModelConfig config();

    /** How many KV blocks of how many tokens this backend holds; the engine's {@link BlockPool} hands out their ids. */
    KvCapacity kvCapacity();

    /**
     * Runs a step. Every window's table must already have blocks for its positions
     * {@code [start, start + tokens.length)}; afterwards their K/V are written there.
     */
    StepOutput execute(ModelStep step);

    /** True when windows may carry a {@link ModelStep.Draw} (tokens drawn on the device; their logits stay there). */
    default boolean drawsOnDevice() {
        return false;
    }

    /** Whether {@link ModelStep#tapLayers()} may be non-empty (the residual stream read back after chosen layers). */
    default boolean supportsTaps() {
        return false;
    }

    /** A backend's KV capacity. */
    record KvCapacity(int blocks, int blockSize) {
        public KvCapacity {
            if (blocks < 1 || blockSize < 1) {
                throw new IllegalArgumentException("a KV pool needs at least one block of at least one token: " + blocks + " x " + blockSize);
            }
        }

        /** A pool over these blocks: one per backend, owned by whoever drives it. */
        public BlockPool newPool() {
            return new BlockPool(blocks, blockSize);
        }
    }

    /**
     * One window of one sequence for simple drivers (the CLI's generators, tests): reserves its
     * blocks, runs it, advances the table.
     *
     * @param allLogits true: logits of every row; false: of the last row only
     */
    static float[][] run(ForwardPass pass, int[] tokens, BlockTable table, boolean allLogits) {
        int start = table.tokens();
        table.reserve(start + tokens.length);
        ModelStep.Window w = new ModelStep.Window(tokens, start, table, allLogits ? ModelStep.allRows(tokens.length) : ModelStep.lastRow(tokens.length),
                null);
        StepOutput out = pass.execute(new ModelStep(List.of(w)));
        table.advance(start + tokens.length);
        return out.logits().getFirst();
    }

    /**
     * Checks a step's windows against the model and the tables (none empty, positions within
     * max_position_embeddings, blocks reserved, logit rows in range, draws only where allowed) and
     * returns each window's first row in the step (and, last, the step's row count).
     */
    static int[] checkWindows(ForwardPass pass, ModelStep step) {
        ModelConfig c = pass.config();
        List<ModelStep.Window> windows = step.windows();
        int[] rowStart = new int[windows.size() + 1];
        int n = 0;
        for (int i = 0; i < windows.size(); i++) {
            ModelStep.Window win = windows.get(i);
            int len = win.tokens().length;
            int end = win.start() + len;
            if (end > c.maxPositions()) {
                throw new IllegalArgumentException("positions up to " + end + " exceed max_position_embeddings " + c.maxPositions());
            }
            if ((long) win.table().numBlocks() * win.table().blockSize() < end) {
                throw new IllegalArgumentException("window " + i + " reaches position " + end + " but its table has room for "
                        + (long) win.table().numBlocks() * win.table().blockSize() + " (the engine reserves blocks before a step)");
            }
            for (int t : win.tokens()) {
                if (t < 0 || t >= c.vocabSize()) {
                    throw new IllegalArgumentException("token id " + t + " is outside the vocabulary [0, " + c.vocabSize() + ")");
                }
            }
            int prev = -1;
            for (int r : win.logitRows()) {
                if (r <= prev || r >= len) {
                    throw new IllegalArgumentException("window " + i + ": logit rows must be ascending rows of the window, got " + r);
                }
                prev = r;
            }
            if (win.draw() != null && !pass.drawsOnDevice()) {
                throw new UnsupportedOperationException(pass.getClass().getSimpleName() + " does not draw tokens on the device");
            }
            rowStart[i] = n;
            n += len;
        }
        if (step.tapLayers().length > 0 && !pass.supportsTaps()) {
            throw new UnsupportedOperationException(pass.getClass().getSimpleName() + " does not read hidden states back");
        }
        for (int l : step.tapLayers()) {
            if (l < 0 || l >= c.executedLayers()) {
                throw new IllegalArgumentException("tap layer " + l + " is outside the executed layers [0, " + c.executedLayers() + ")");
            }
        }
        rowStart[windows.size()] = n;
        return rowStart;
    }

    @Override
    void close();
}

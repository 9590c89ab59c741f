package dev.spindle.step;

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

    /** How many KV blocks of how many tokens this backend holds; the engine's block pool hands out their ids. */
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

    /**
     * Whether {@link #start} takes steps whose windows' first tokens are {@linkplain ModelStep#fed fed} from the previous
     * step's device draws: the engine can then start step N + 1 before N's tokens reach the host, and the host's work
     * between two steps (reading the tokens, emitting them, building and sending the next plan) overlaps the device's.
     */
    default boolean runsAhead() {
        return false;
    }

    /**
     * Starts a step and returns where its output is read. Steps run in the order they are started, each reading the K/V
     * the ones before it wrote; a step's windows and tables are read when it starts (the engine may advance, cut or free a
     * table afterwards). At most two steps are pending at once: the older is awaited before a third starts. This default
     * runs the step now ({@link #execute}).
     */
    default PendingStep start(ModelStep step) {
        StepOutput out = execute(step);
        return () -> out;
    }

    /** A started step ({@link #start}): {@link #await} blocks until its output is on the host; called once. */
    @FunctionalInterface
    interface PendingStep {
        StepOutput await();
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
            if (step.fedRow(i) >= 0 && !pass.runsAhead()) {
                throw new UnsupportedOperationException(pass.getClass().getSimpleName() + " does not feed a step's tokens from the previous step's draws");
            }
            if (step.fedRow(i) < -1) {
                throw new IllegalArgumentException("window " + i + ": a fed row is -1 or a logit row of the previous step, got " + step.fedRow(i));
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

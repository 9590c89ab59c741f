package dev.spindle.backend;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/** Tests' driver of a backend: one block pool per backend, windows reserved at creation, tables advanced after the step. */
public final class TestSteps {
    private static final Map<ForwardPass, BlockPool> POOLS = new IdentityHashMap<>();

    private TestSteps() {
    }

    /** The tests' pool over this backend's KV (one per backend instance). */
    public static synchronized BlockPool pool(ForwardPass pass) {
        return POOLS.computeIfAbsent(pass, p -> new BlockPool(p.kvCapacity()));
    }

    /** A window at the table's end, its blocks reserved: logits of every row, the last, or none. */
    public static ModelStep.Window window(int[] tokens, BlockTable t, boolean allLogits, boolean wantLogits) {
        t.reserve(t.tokens() + tokens.length);
        int[] rows = !wantLogits ? ModelStep.noRows() : allLogits ? ModelStep.allRows(tokens.length) : ModelStep.lastRow(tokens.length);
        return new ModelStep.Window(tokens, t.tokens(), t, rows, null);
    }

    /** Runs the windows as one step and advances their tables; per window its logits rows. */
    public static List<float[][]> forward(ForwardPass pass, List<ModelStep.Window> windows) {
        StepOutput out = pass.execute(new ModelStep(windows));
        for (ModelStep.Window w : windows) {
            ((BlockTable) w.table()).advance(w.start() + w.tokens().length);
        }
        return out.logits();
    }

    /** Every row's logits of {@code prompt} run as one window on a fresh table. */
    public static float[][] windowLogits(ForwardPass pass, int[] prompt) {
        BlockTable t = new BlockTable(pool(pass));
        try {
            return forward(pass, List.of(window(prompt, t, true, true))).getFirst();
        } finally {
            t.release();
        }
    }

    /** Asserts that {@code prompt} decoded one token a step gives, bit for bit, each row of {@code window} (its window's logits). */
    public static void assertStepsEqualWindow(ForwardPass pass, int[] prompt, float[][] window, String label) {
        BlockTable t = new BlockTable(pool(pass));
        try {
            for (int i = 0; i < prompt.length; i++) {
                float[] row = forward(pass, List.of(window(new int[]{prompt[i]}, t, false, true))).getFirst()[0];
                org.junit.jupiter.api.Assertions.assertArrayEquals(window[i], row, label + ": position " + i + " decoded alone differs from the window's row");
            }
        } finally {
            t.release();
        }
    }

    /** Each prompt row's residual after the tap layers, from one window or from one-row steps. */
    public static float[][] taps(ForwardPass pass, int[] prompt, int[] layers, boolean rowByRow) {
        BlockTable t = new BlockTable(pool(pass));
        try {
            float[][] out = new float[prompt.length][];
            int step = rowByRow ? 1 : prompt.length;
            for (int at = 0; at < prompt.length; at += step) {
                int[] part = java.util.Arrays.copyOfRange(prompt, at, at + step);
                t.reserve(at + step);
                var w = new ModelStep.Window(part, at, t, ModelStep.lastRow(step), null, true);
                float[][] rows = pass.execute(new ModelStep(List.of(w), layers)).taps().getFirst();
                t.advance(at + step);
                System.arraycopy(rows, 0, out, at, step);
            }
            return out;
        } finally {
            t.release();
        }
    }

}

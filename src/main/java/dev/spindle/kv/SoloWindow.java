package dev.spindle.kv;

import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.List;

/** One window of one sequence, for simple drivers (the CLI's generators, benches, tests): reserve, run, advance. */
public final class SoloWindow {
    private SoloWindow() {
    }

    /**
     * Reserves the table's blocks for {@code tokens}, runs them as the step's only window at the table's end, and advances
     * the table past them.
     *
     * @param allLogits true: logits of every row; false: of the last row only
     * @return the window's logit rows
     */
    public static float[][] run(ForwardPass pass, int[] tokens, BlockTable table, boolean allLogits) {
        int start = table.tokens();
        table.reserve(start + tokens.length);
        ModelStep.Window w = new ModelStep.Window(tokens, start, table, allLogits ? ModelStep.allRows(tokens.length) : ModelStep.lastRow(tokens.length),
                null);
        StepOutput out = pass.execute(new ModelStep(List.of(w)));
        table.advance(start + tokens.length);
        return out.logits().getFirst();
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/** A step's {@link StepOutput} from what came back: the logit rows (in the plan's order) split back into their windows. */
final class StepOutputs {
    private StepOutputs() {
    }

    /**
     * A step run now: per window, its drawn ids where it has a draw, else its logit rows.
     *
     * @param counts    per window, its logit rows
     * @param rows      per logit row of the step, its logits on the host (null where drawn)
     * @param rowTokens per logit row, the id drawn on the device (null where nothing was drawn)
     * @param taps      per window, its tapped rows (or null)
     */
    static StepOutput of(List<Window> windows, int[] counts, float[][] rows, int[] rowTokens, List<float[][]> taps) {
        List<float[][]> out = new ArrayList<>();
        List<int[]> drawn = new ArrayList<>();
        for (int wi = 0, j = 0; wi < windows.size(); wi++) {
            int n = counts[wi];
            if (windows.get(wi).draw() != null) {
                drawn.add(Arrays.copyOfRange(rowTokens, j, j + n));
                out.add(new float[0][]);
            } else {
                out.add(Arrays.copyOfRange(rows, j, j + n));
                drawn.add(null);
            }
            j += n;
        }
        return new StepOutput(out, drawn, taps);
    }

    /** A step started ahead, every wanted row drawn: per window its ids, each checked to lie in the vocabulary. */
    static StepOutput drawn(List<Window> windows, int[] counts, int[] ids, int vocab) {
        List<float[][]> out = new ArrayList<>();
        List<int[]> tokens = new ArrayList<>();
        for (int wi = 0, j = 0; wi < counts.length; wi++) {
            out.add(new float[0][]);
            if (windows.get(wi).draw() == null) {
                tokens.add(null);
                continue;
            }
            for (int r = j; r < j + counts[wi]; r++) {
                if (ids[r] < 0 || ids[r] >= vocab) {
                    throw new IllegalStateException("the device drew token id " + ids[r] + " for window " + wi + ", outside the vocabulary");
                }
            }
            tokens.add(Arrays.copyOfRange(ids, j, j + counts[wi]));
            j += counts[wi];
        }
        return new StepOutput(out, tokens, Collections.nCopies(windows.size(), null));
    }
}

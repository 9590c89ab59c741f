package dev.spindle.engine.sched;

import dev.spindle.step.ModelStep;

import java.util.ArrayList;
import java.util.List;

/**
 * The decode step after a started one, planned before that step's tokens reach the host (asynchronous scheduling, {@link
 * EngineCore}): each of its sequences decodes the token the started step draws on the device, taken there from that step's
 * draws ({@link ModelStep#fed}).
 *
 * @param entries the step's entries, one token each, in the started step's order
 * @param fedRows per entry, the started step's logit row whose drawn token is its input
 */
record AheadStep(List<StepPlan.Entry> entries, int[] fedRows) {
    /**
     * The step after {@code plan} (whose windows are {@code windows}), or null where it is not plain to see from here: an
     * entry that does not sample exactly one row drawn on the device (a prefill chunk, drafts, host sampling), a sequence
     * under a grammar or whose next token the host must choose, or one already finished. A sequence whose token from
     * {@code plan} is its last (max_tokens, or the context's end) is left out.
     */
    static AheadStep after(StepPlan plan, List<ModelStep.Window> windows, int maxPositions) {
        List<StepPlan.Entry> entries = new ArrayList<>();
        List<Integer> fedRows = new ArrayList<>();
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            ModelStep.Window w = windows.get(i);
            Sequence s = e.sequence();
            if (!e.samples() || e.drafted() || w.draw() == null || w.logitRows().length != 1 || s.finished) {
                return null;
            }
            int at = e.from() + e.count(); // where the started step's token goes
            if (s.generated() + 1 >= s.params.maxTokens() || at + 1 >= maxPositions) {
                continue; // that token is its last (emit's "length")
            }
            if (s.constraint != null || !DeviceDrawing.drawable(s, at, s.generated() + 1)) {
                return null;
            }
            entries.add(new StepPlan.Entry(s, at, 1, true, StepPlan.NO_DRAFTS));
            fedRows.add(i); // one logit row a window: window i's row is row i
        }
        return entries.isEmpty() ? null : new AheadStep(entries, fedRows.stream().mapToInt(Integer::intValue).toArray());
    }

    /** The step's windows: a placeholder token each (fed on the device), the uniform each draw takes from its sequence. */
    List<ModelStep.Window> windows() {
        List<ModelStep.Window> out = new ArrayList<>();
        for (StepPlan.Entry e : entries) {
            Sequence s = e.sequence();
            // the uniform taken as DeviceDrawing.next takes it (the sequence's next one, in the same order as without running ahead)
            double[] u = {s.params.temperature() > 0 ? s.rng.nextDouble() : 0};
            out.add(new ModelStep.Window(new int[]{0}, e.from(), s.table, ModelStep.lastRow(1), DeviceDrawing.draw(s.params, u)));
        }
        return out;
    }
}

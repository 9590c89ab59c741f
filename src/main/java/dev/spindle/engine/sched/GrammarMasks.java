package dev.spindle.engine.sched;

import dev.spindle.step.ModelStep;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;

/**
 * The grammar masks of a step's constrained rows, computed on the common pool: prepared while the forward pass runs (a
 * mask depends only on the sequence's text so far), applied to the rows in parallel once they are back (each row is
 * independent, and at a 166K vocabulary a row's mask takes a good part of a millisecond). A failing grammar ends its own
 * sequence, with the error, never the step.
 */
final class GrammarMasks {
    private GrammarMasks() {
    }

    /** Starts preparing the mask of every constrained sequence that samples on the host this step. */
    static List<ForkJoinTask<?>> prepare(StepPlan plan, List<ModelStep.Window> windows) {
        List<ForkJoinTask<?>> masks = new ArrayList<>();
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && windows.get(i).draw() == null && c != null && !c.unmasked()) {
                masks.add(ForkJoinPool.commonPool().submit(() -> {
                    try {
                        c.prepare();
                    } catch (RuntimeException | StackOverflowError ignored) {
                        // computed again, and reported for this sequence alone, when its row is masked
                    }
                }));
            }
        }
        return masks;
    }

    /**
     * The masked logits row of each constrained sequence that samples this step (null elsewhere). The backend's row is
     * masked in place (nothing reads it unmasked afterwards) unless the sequence also scores its prompt from these rows.
     *
     * @param errors per entry, the error its grammar raised (its row may be half masked), else null
     */
    static float[][] apply(StepPlan plan, List<ModelStep.Window> windows, List<float[][]> results, Throwable[] errors) {
        int n = plan.entries().size();
        float[][] masked = new float[n][];
        List<ForkJoinTask<?>> tasks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && !e.drafted() && windows.get(i).draw() == null && c != null && !c.unmasked() && e.sequence().params.maxTokens() > 0) {
                int index = i;
                float[][] rows = results.get(i);
                tasks.add(ForkJoinPool.commonPool().submit(() -> {
                    try {
                        float[] last = rows[rows.length - 1];
                        float[] m = e.sequence().promptLogprobs == null ? last : last.clone();
                        c.mask(m);
                        masked[index] = m;
                    } catch (RuntimeException | StackOverflowError failure) {
                        errors[index] = failure;
                    }
                }));
            }
        }
        tasks.forEach(ForkJoinTask::join);
        return masked;
    }
}

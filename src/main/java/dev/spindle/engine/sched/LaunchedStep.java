package dev.spindle.engine.sched;

import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.List;
import java.util.concurrent.ForkJoinTask;

/**
 * A step started on the backend and not yet read: its plan, what it runs, where its output is read, its grammar masks
 * being prepared meanwhile ({@link GrammarMasks#prepare}), and when it started (ns).
 */
record LaunchedStep(StepPlan plan, ModelStep step, ForwardPass.PendingStep pending, List<ForkJoinTask<?>> masks, long t0) {
    /**
     * Starts a step (asynchronous scheduling: {@link ForwardPass#start}) or runs it now: either way its output is read
     * through {@link #pending}, which rethrows the backend's failure there.
     */
    static LaunchedStep launch(ForwardPass model, boolean start, StepPlan plan, ModelStep step) {
        List<ForkJoinTask<?>> masks = GrammarMasks.prepare(plan, step.windows());
        long t0 = System.nanoTime();
        ForwardPass.PendingStep pending;
        try {
            if (start) {
                pending = model.start(step);
            } else {
                StepOutput out = model.execute(step);
                pending = () -> out;
            }
        } catch (RuntimeException err) {
            pending = () -> {
                throw err;
            };
        }
        return new LaunchedStep(plan, step, pending, masks, t0);
    }
}

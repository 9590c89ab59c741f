package dev.spindle.engine.sched;

import dev.spindle.engine.speculative.Speculation;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;

/**
 * Asynchronous scheduling: the step after the one being read, started on the backend before that one's tokens reach the
 * host, where the next step is plain to see. Every sequence of the current step then decodes its device-drawn token next
 * (no drafts, taps, grammar or host sampling; nobody waiting who might be admitted; blocks free without preempting; with
 * speculative decoding, more sequences than it drafts for). Its windows take their tokens from the current step's draws on
 * the device ({@link ModelStep#fed}); a sequence that the current token ends (a stop token, a stop string) is dropped from
 * it when it is read: its row was computed for nothing, and its K/V write lands past the end of a table that is freed.
 */
final class RunAhead {
    private final ForwardPass model;
    private final Scheduler scheduler;
    private final Speculation spec;
    private final int maxPositions;
    /** The step started ahead of the one being read, or null. */
    private LaunchedStep ahead;

    RunAhead(ForwardPass model, Scheduler scheduler, Speculation spec, int maxPositions) {
        this.model = model;
        this.scheduler = scheduler;
        this.spec = spec;
        this.maxPositions = maxPositions;
    }

    /** The step started ahead, now to be read (null if none); it is no longer held here. */
    LaunchedStep take() {
        LaunchedStep s = ahead;
        ahead = null;
        return s;
    }

    boolean pending() {
        return ahead != null;
    }

    /** Starts the step after {@code now} where it is plain to see (else the next step is scheduled once now's tokens are in). */
    void startAfter(LaunchedStep now) {
        if (!model.runsAhead() || now.step().tapLayers().length > 0 || scheduler.admissionDue(now.plan().entries().size())
                || now.plan().entries().size() != scheduler.running()) {
            return;
        }
        AheadStep next = AheadStep.after(now.plan(), now.step().windows(), maxPositions);
        // beside speculative decoding only where the next step would not draft: more sequences decode than its batch (its
        // proposer is then not asked, as propose() would not ask it), and no hidden states are tapped (checked above)
        if (next == null || (spec.enabled() && next.entries().size() <= spec.maxBatch()) || !scheduler.reserveAhead(next.entries())) {
            return;
        }
        ahead = LaunchedStep.launch(model, true, new StepPlan(next.entries()), new ModelStep(next.windows(), new int[0], true, next.fedRows()));
    }
}

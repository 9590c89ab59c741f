package dev.spindle.engine.sched;

import dev.spindle.backend.ForwardingPass;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.List;

/**
 * A test's backend that runs ahead as a GPU does, around one that draws on the "device" by the host rule: a started step
 * reads its windows and tables at once (as the CUDA pass builds its plan), takes each fed first token from the previous
 * started step's draws (never the host's placeholder), and its output is read later. It holds the CUDA pass's rules: at
 * most two steps pending, awaited once each and in the order started, and a fed row must have been drawn on the device.
 */
final class RunAheadPass extends ForwardingPass {
    private List<Integer> lastDrawn = List.of();
    private final List<Handle> pending = new ArrayList<>();

    RunAheadPass(ForwardPass drawing) {
        super(drawing);
        if (!drawing.drawsOnDevice()) {
            throw new IllegalArgumentException("running ahead feeds tokens drawn on the device");
        }
    }

    @Override
    public boolean runsAhead() {
        return true;
    }

    @Override
    public StepOutput execute(ModelStep step) {
        throw new AssertionError("an engine that runs ahead starts its steps");
    }

    @Override
    public PendingStep start(ModelStep step) {
        if (pending.size() >= 2) {
            throw new IllegalStateException("a third step started while two are pending");
        }
        List<ModelStep.Window> windows = new ArrayList<>();
        for (int i = 0; i < step.windows().size(); i++) {
            ModelStep.Window w = step.windows().get(i);
            int row = step.fedRow(i);
            if (row >= 0) {
                if (row >= lastDrawn.size() || lastDrawn.get(row) < 0) {
                    throw new IllegalArgumentException("window " + i + " is fed from row " + row + ", which the previous step did not draw");
                }
                int[] tokens = w.tokens().clone();
                tokens[0] = lastDrawn.get(row);
                w = new ModelStep.Window(tokens, w.start(), w.table(), w.logitRows(), w.draw(), w.tap());
            }
            windows.add(w);
        }
        StepOutput out = inner.execute(new ModelStep(windows, step.tapLayers(), step.tapsToHost()));
        // as the CUDA pass: only a step whose every wanted row was drawn on the device (and that wanted some) leaves ids to feed from
        List<Integer> drawn = new ArrayList<>();
        boolean all = true;
        for (int i = 0; i < windows.size(); i++) {
            int[] ids = out.tokens().get(i);
            for (int r = 0; r < windows.get(i).logitRows().length; r++) {
                drawn.add(ids == null ? -1 : ids[r]);
                all &= ids != null;
            }
        }
        lastDrawn = all ? drawn : List.of();
        Handle h = new Handle(out);
        pending.add(h);
        return h;
    }

    private final class Handle implements PendingStep {
        private final StepOutput out;

        Handle(StepOutput out) {
            this.out = out;
        }

        @Override
        public StepOutput await() {
            if (pending.isEmpty() || pending.getFirst() != this) {
                throw new IllegalStateException(pending.contains(this) ? "awaited before an older step" : "awaited twice");
            }
            pending.removeFirst();
            return out;
        }
    }
}

package dev.spindle.backend;

import dev.spindle.model.ModelConfig;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.KvCapacity;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

/** A test's pass around another: every call goes to {@code inner} unless the test's subclass changes it. */
public abstract class ForwardingPass implements ForwardPass {
    protected final ForwardPass inner;

    protected ForwardingPass(ForwardPass inner) {
        this.inner = inner;
    }

    @Override
    public ModelConfig config() {
        return inner.config();
    }

    @Override
    public KvCapacity kvCapacity() {
        return inner.kvCapacity();
    }

    @Override
    public boolean drawsOnDevice() {
        return inner.drawsOnDevice();
    }

    @Override
    public boolean supportsTaps() {
        return inner.supportsTaps();
    }

    @Override
    public boolean runsAhead() {
        return inner.runsAhead();
    }

    @Override
    public StepOutput execute(ModelStep step) {
        return inner.execute(step);
    }

    @Override
    public PendingStep start(ModelStep step) {
        return inner.start(step);
    }

    @Override
    public void close() {
        inner.close();
    }
}

package dev.spindle.backend.cuda;

/**
 * The host's part of greedy decode steps, summed over steps (the bench's breakdown of a step: {@link CudaForwardPass#stepTimes}).
 *
 * @param planNanos   checking each step and building its plan
 * @param sendNanos   sending the plan (after the previous upload's event)
 * @param launchNanos launching the step (its graph, or kernel by kernel)
 * @param waitNanos   waiting for the ids and reading them (the GPU's time from the launch on, and the copy back)
 * @param steps       the steps summed
 * @param graphNanos  with {@link CudaForwardPass#timeGraphs}: the GPU's time from a timing event recorded before each step's
 *                    graph launch to one after it (the graph as it runs in the step loop)
 * @param graphSteps  the steps whose graph was timed so
 */
public record StepTimes(long planNanos, long sendNanos, long launchNanos, long waitNanos, long steps, long graphNanos, long graphSteps) {
    static final StepTimes NONE = new StepTimes(0, 0, 0, 0, 0, 0, 0);

    StepTimes plus(StepTimes o) {
        return new StepTimes(planNanos + o.planNanos, sendNanos + o.sendNanos, launchNanos + o.launchNanos, waitNanos + o.waitNanos,
                steps + o.steps, graphNanos + o.graphNanos, graphSteps + o.graphSteps);
    }

    /** The steps after {@code earlier} (a reading of the same pass's sums). */
    public StepTimes since(StepTimes earlier) {
        return new StepTimes(planNanos - earlier.planNanos, sendNanos - earlier.sendNanos, launchNanos - earlier.launchNanos,
                waitNanos - earlier.waitNanos, steps - earlier.steps, graphNanos - earlier.graphNanos, graphSteps - earlier.graphSteps);
    }
}

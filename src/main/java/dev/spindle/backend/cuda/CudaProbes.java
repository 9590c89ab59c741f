package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What the bench and the tests ask of a {@link CudaForwardPass} that serving never does: replaying and timing its
 * captured graphs, forcing a prefill attention kernel or a paired-launch variant, profiling a step kernel by kernel, and
 * the greedy steps' host phases. Kept out of the pass so that the production class holds only what serving runs.
 */
public final class CudaProbes {
    private final CudaForwardPass pass;

    CudaProbes(CudaForwardPass pass) {
        this.pass = pass;
    }

    /** The greedy steps' host phases so far, summed (the bench reads them before and after its steps). */
    public StepTimes stepTimes() {
        return pass.stepTimes;
    }

    /**
     * Whether each greedy step's graph is timed on the GPU from its launch on ({@link StepTimes#graphNanos}), by timing
     * events recorded before and after the launch.
     */
    public void timeGraphs(boolean on) {
        pass.graphs.time(on);
    }

    /** Whether a step has replayed a graph that is still held ({@link #replayLastGraph} has one to replay). */
    public boolean replayedAGraph() {
        return pass.graphs.launchedAny();
    }

    /**
     * The last graph-eligible step's graph replayed {@code n} times back to back, then one wait; seconds a replay. Each
     * replay is that step's work again (its rows, positions, KV slots and tokens; a greedy graph's argmax writes its ids
     * into {@link DrawnIds}, apart from the plan). Against a step's wall time it gives what the host's part of a step
     * costs: building and sending the plan, launching, waiting for and reading the ids.
     */
    public double replayLastGraph(int n) {
        pass.cuda.makeCurrent();
        return pass.graphs.replayLast(n);
    }

    /**
     * Runs paired variant v for both epilogues in steps of up to 8 rows, whatever the timing and PairingChoice chose: for
     * tests of the paired launches inside whole steps. Drops the captured graphs.
     */
    public void usePairedVariant(LinearRowsVariant v) {
        if (!pass.pairing.shapes || pass.group != null) {
            throw new IllegalStateException("this pass's shapes have no paired launches, or it leads a tensor-parallel group");
        }
        pass.pairing.use(v, pass.w);
        pairedEpilogues(true);
    }

    /** Whether prefill attention kernel {@code kernel} is loaded for this model's head dim on this GPU. */
    public boolean hasPrefillAttentionKernel(int kernel) {
        return pass.prefill.loaded(kernel);
    }

    /**
     * Runs prefill attention with {@code kernel} (one of {@link AttentionKernels#PREFILL_KERNELS}; they compute the same
     * values), or -1 to let the step's length pick. For comparing the kernels' speed.
     */
    public void prefillAttentionKernel(int kernel) {
        pass.prefill.force(kernel);
    }

    /**
     * Runs one step kernel by kernel, timing each operation on the stream (seconds per operation kind, summed over layers,
     * plus "head"): where a step's time goes.
     */
    public Map<String, Double> profileStep(ModelStep step) {
        pass.cuda.makeCurrent();
        pass.profile = new LinkedHashMap<>();
        pass.stepTaps = new int[0];
        pass.tapRows = 0;
        try {
            StepPlan p = pass.prepare(step, 0);
            pass.layers(p);
            pass.op("head", () -> pass.head(p, 0, Math.min(pass.b.logitRowsMax, p.logitRows)));
            return pass.profile;
        } finally {
            pass.profile = null;
        }
    }

    /** Whether the paired launches run where chosen ({@link #pairedEpilogues(boolean)}, PairingChoice). */
    public boolean pairedEpilogues() {
        return pass.pairing.on();
    }

    /**
     * Runs the paired launches where PairedLinear chose them ({@code on}) or never: PairingChoice's switch, and for comparing
     * the two ways in one process on the same GEMM choices (the bench's decode_paired_epilogues). They compute the same
     * bits. Drops the captured graphs.
     */
    public void pairedEpilogues(boolean on) {
        if (pass.group != null) {
            throw new IllegalStateException("paired epilogues are switched per pass, not over a tensor-parallel group");
        }
        pass.cuda.makeCurrent();
        pass.graphs.drop();
        pass.pairing.on(on);
    }

    /**
     * The prefill kernel a step runs whose longest prefill window ends at key {@code keys} ({@link PrefillKernelChoice}; every
     * step's, when one was set: {@link #prefillAttentionKernel}).
     */
    public int prefillKernel(int keys) {
        return pass.prefill.forKeys(keys);
    }
}

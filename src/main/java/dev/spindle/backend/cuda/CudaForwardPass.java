package dev.spindle.backend.cuda;

import dev.spindle.backend.DecoderProgram;
import dev.spindle.model.ModelConfig;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.KvCapacity;
import dev.spindle.step.ModelStep.Draw;
import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * The forward pass on an NVIDIA GPU, for stock and looped llama, in the CPU reference's
 * rounding points: bf16 weights and activations, fp32 accumulation, bf16 paged KV pool in
 * device memory. Per executed layer: rms_norm, one GEMM for q|k|v, rope_kv_write,
 * attention (one pass; decode rows: split CTAs, then attention_merge), GEMM o, add_rms_norm (the residual
 * add fused with the next norm), GEMM gate|up, swiglu, GEMM down. GEMMs are cuBLASLt with
 * a pinned split-free algorithm per weight shape; everything else is Spindle's kernels.
 * Only token ids, positions and block tables go to the device per step; logits (or, for
 * {@link #greedy}, token ids) come back.
 */
public final class CudaForwardPass implements ForwardPass {
    private static final System.Logger LOG = System.getLogger("dev.spindle.cuda");

    /** The model's config (what {@link #config()} gives); {@code c} is the shapes this pass computes (one rank's under tensor parallelism). */
    private final ModelConfig model;
    private final ModelConfig c;
    final CudaDriver cuda;
    private final CudaKernels k;
    private final CublasLt lt;
    private final Linear linear;
    /** gate|up with SwiGLU and q|k|v with rope_kv_write in one launch each, where that is faster (decode steps on Hopper). */
    final PairedLaunches pairing;
    final CudaWeights w;
    private final CudaOptions opt;
    private final KvPool kv;
    final StepBuffers b;
    /** Which prefill attention kernel a step runs, of those loaded for this head dim. */
    final PrefillKernelChoice prefill;
    /** Recorded after each copy from {@link #metaHost}: the next step rewrites the buffer only once it has been read. */
    private final MemorySegment metaUploaded;
    /** Captured graphs kept at most (one per step shape); a step of a new shape beyond it launches kernel by kernel. */
    static final int MAX_GRAPHS = 512;
    /** The decode steps' captured graphs, by {@link #graphKey}. */
    final GraphCache graphs;
    /** The head's draws and logits read back; null on a tensor-parallel group's other ranks (no head). */
    private final DeviceSampling sampling;
    /** Steps run on this pass (the serial {@link DrawnIds} keeps track of). */
    private long stepSerial;
    int tapRows; // rows of the last step's taps (0: none)
    int[] stepTaps = new int[0];
    /** Whether this pass computes the head (every pass but a tensor-parallel group's other ranks). */
    private final boolean head;
    /** The other ranks, where this pass leads a tensor-parallel group; null otherwise. */
    TensorParallelGroup group;
    /** Seconds of the constructor's phases: the GEMM choices (cuBLASLt's and linear_rows'), the tensor maps, the KV pool. */
    private final java.util.Map<String, Double> setupSeconds;

    public java.util.Map<String, Double> setupSeconds() {
        return setupSeconds;
    }

    /** Whether a buffer a captured step holds moved since {@link #takeMoved} (a group's leader drops its graphs then). */
    private boolean movedSinceTaken;

    boolean takeMoved() {
        boolean m = movedSinceTaken;
        movedSinceTaken = false;
        return m;
    }

    /** Partial buffer {@code i} (0: o_proj's, 1: down_proj's) of a tensor-parallel rank. */
    long partialBuffer(int i) {
        return b.partial[i];
    }

    /** The row-parallel layers' output buffer (rows x hidden bf16), which the all-reduce writes. */
    long projBuffer() {
        return b.proj;
    }

    /** Each rank's memory (weights, KV pool), where this pass leads a tensor-parallel group (empty otherwise). */
    public List<String> tensorParallelMemory() {
        return group == null ? List.of() : group.memorySplit();
    }

    /** Tensor-parallel ranks this pass computes with (1: none). */
    public int tensorParallelSize() {
        return group == null ? 1 : group.size();
    }

    public CudaForwardPass(ModelConfig config, CudaKernels kernels, CublasLt lt, CudaWeights weights, CudaOptions options) {
        this(config, config, kernels, lt, null, weights, options, true);
    }

    /**
     * A pass computing {@code shapes} (a tensor-parallel rank's heads and columns: {@link dev.spindle.backend.TensorParallelLayout#rankConfig})
     * of {@code model}; with {@code partialLt} (fp32 outputs) its o_proj and down_proj write partials for the group's all-reduce;
     * the head only where {@code head}.
     */
    CudaForwardPass(ModelConfig model, ModelConfig config, CudaKernels kernels, CublasLt lt, CublasLt partialLt, CudaWeights weights, CudaOptions options,
                    boolean head) {
        this.model = model;
        this.head = head;
        this.metaUploaded = kernels.driver().createEvent();
        PassGemms.checkShapes(config);
        this.c = config;
        this.k = kernels;
        this.cuda = kernels.driver();
        this.graphs = new GraphCache(cuda, MAX_GRAPHS, k.dependentLaunches());
        this.lt = lt;
        this.linear = new Linear(kernels, lt);
        this.pairing = new PairedLaunches(new PairedLinear(kernels, linear), config, options.blockSize(), weights.layer(0), options.kv8());
        this.w = weights;
        this.opt = options;
        // an fp8 pool is read by the fp8 twins of the mma.sync prefill kernels (the wgmma ones read bf16 only)
        this.prefill = new PrefillKernelChoice(options.kv8() ? kernel -> kernels.fp8().hasAttention(config.headDim(), kernel)
                : kernel -> kernels.hasAttention(config.headDim(), kernel));
        int n = options.maxStepRows();
        b = new StepBuffers(cuda, c, n, head, partialLt != null);
        sampling = head ? new DeviceSampling(k, c.vocabSize(), n, b.logitRowsMax, b.logits) : null;
        long tBuffers = System.nanoTime();
        // pin every GEMM's algorithm now (from the cache, or timing candidates), never in the middle of a step
        if (options.gemmCache() != null) {
            lt.useCache(options.gemmCache());
            if (partialLt != null) {
                partialLt.useCache(options.gemmCache());
            }
        }
        if (partialLt != null) {
            linear.usePartials(partialLt);
        }
        PassGemms.choose(linear, pairing, w, b.partial != null, head);
        long tGemms = System.nanoTime();
        PassGemms.mapTensors(linear, pairing, w, b, c, n, head);
        cuda.sync();
        long tMaps = System.nanoTime();
        kv = new KvPool(cuda, c, options);
        long tEnd = System.nanoTime();
        setupSeconds = java.util.Map.of("gemm_choices", (tGemms - tBuffers) / 1e9, "tensor_maps", (tMaps - tGemms) / 1e9,
                "kv_pool", (tEnd - tMaps) / 1e9);
    }

    @Override
    public ModelConfig config() {
        return model;
    }

    /** The shapes this pass computes: the model's, or one tensor-parallel rank's. */
    ModelConfig shapes() {
        return c;
    }

    @Override
    public KvCapacity kvCapacity() {
        return kv.capacity;
    }

    /** The device this pass runs on. */
    public CudaDriver driver() {
        return cuda;
    }

    public CudaWeights weights() {
        return w;
    }

    /** The kernels (a draft head beside this pass runs on them). */
    public CudaKernels kernels() {
        return k;
    }

    /** The linear layer (its GEMM plans; a draft head prepares its own shapes on it). */
    public Linear linear() {
        return linear;
    }

    public long kvPoolBytes() {
        return kv.bytes();
    }

    /** Whether decode steps replay CUDA graphs (a head beside this pass follows it). */
    public boolean cudaGraphs() {
        return opt.cudaGraphs();
    }

    @Override
    public boolean drawsOnDevice() {
        return true;
    }

    @Override
    public boolean supportsTaps() {
        return true;
    }

    @Override
    public StepOutput execute(ModelStep step) {
        cuda.makeCurrent(); // the engine thread, not the thread that opened the pass
        List<Window> windows = step.windows();
        StepPlan plan = run(step, false);
        Draw[] rowDraws = new Draw[plan.logitRows];
        double[] rowU = new double[plan.logitRows];
        DeviceSampling.rowDraws(windows, rowDraws, rowU);
        boolean anyDraw = false;
        for (Draw d : rowDraws) {
            anyDraw |= d != null;
        }
        float[][] all = sampling.headAndDraw(plan.logitRows, plan.headDone, rowDraws, rowU, (int) (stepSerial & 1), (first, m) -> head(plan, first, m));
        // the drawn rows' ids (others: whatever the buffer held); not marked as the draws a next step may be fed from: only
        // a started step's (start) or greedy()'s are
        int[] rowTokens = anyDraw ? sampling.drawn.readNow(plan.logitRows) : null;
        return StepOutputs.of(windows, plan.logitCounts, all, rowTokens, HostTaps.read(cuda, step, plan.rows, c.hiddenSize(), b.taps()));
    }

    /** Steps without taps and with a head (no tensor-parallel group: its ranks' plans are sent apart) may be fed and run ahead. */
    @Override
    public boolean runsAhead() {
        return head && group == null;
    }

    /**
     * Starts a step without waiting for it, where every wanted row is drawn here and nothing is tapped (else it runs now, as
     * {@link #execute}): its plan is sent, its windows' fed tokens written on the device from the previous step's ids
     * (feed_tokens), its launches (a captured graph for decode steps) and draws queued, and the ids' copy to the host
     * queued behind them; {@link PendingStep#await} waits for that copy alone. The draws are {@link #execute}'s (the sample
     * kernel, greedy rows at T 0 included, not the argmax: a row with NaNs gets the same token either way), so a request's
     * tokens do not depend on whether its steps were started ahead. A step's ids stay in one of two host slots until
     * two more steps have started: await it before then.
     */
    @Override
    public PendingStep start(ModelStep step) {
        List<Window> windows = step.windows();
        boolean drawsAll = runsAhead() && step.tapLayers().length == 0;
        int logitRows = 0;
        for (Window w : windows) {
            drawsAll &= w.logitRows().length == 0 || w.draw() != null;
            logitRows += w.logitRows().length;
        }
        if (!drawsAll || logitRows == 0) {
            if (step.feeds()) {
                throw new IllegalArgumentException("a fed step draws every wanted row on the device, taps nothing and wants some logits");
            }
            StepOutput out = execute(step);
            return () -> out;
        }
        cuda.makeCurrent();
        Draw[] rowDraws = new Draw[logitRows];
        double[] rowU = new double[logitRows];
        DeviceSampling.rowDraws(windows, rowDraws, rowU);
        StepPlan plan = run(step, false);
        sampling.headAndDraw(logitRows, plan.headDone, rowDraws, rowU, (int) (stepSerial & 1), (first, m) -> head(plan, first, m));
        sampling.drawn.drew(stepSerial, logitRows);
        DrawnIds.Copy copy = sampling.drawn.copyBack(stepSerial, logitRows);
        int[] counts = plan.logitCounts.clone();
        int vocab = c.vocabSize();
        return () -> StepOutputs.drawn(windows, counts, copy.ids(), vocab);
    }

    /**
     * The last step's taps where they stay: the buffer ([tap][row][hidden] bf16, rows in the step's order), its rows (0
     * when the last step had no taps) and the tap layers. Valid until the next step.
     */
    public record DeviceTaps(long buffer, int rows, int[] layers) {
    }

    public DeviceTaps deviceTaps() {
        return new DeviceTaps(b.taps(), tapRows, stepTaps.clone());
    }

    /**
     * The same step, sampling greedily on the device inside the captured graph: per wanted logit
     * row, its argmax (in the step's row order). Only the token ids come back.
     */
    public int[] greedy(ModelStep step) {
        long t0 = System.nanoTime();
        cuda.makeCurrent();
        StepPlan plan = run(step, true);
        long t1 = System.nanoTime();
        for (int done = 0; done < plan.logitRows && !plan.headDone; done += b.logitRowsMax) {
            int m = Math.min(b.logitRowsMax, plan.logitRows - done);
            head(plan, done, m);
            k.argmax(b.logits, m, c.vocabSize(), sampling.drawn.device + 4L * done);
        }
        sampling.drawn.drew(stepSerial, plan.logitRows); // the next step may be fed from these ids
        int[] ids = sampling.drawn.readNow(plan.logitRows);
        long t2 = System.nanoTime();
        double graphSeconds = plan.headDone ? graphs.lastLaunchSeconds() : -1;
        boolean timed = graphSeconds >= 0;
        long graphNanos = timed ? Math.round(graphSeconds * 1e9) : 0;
        stepTimes = stepTimes.plus(new StepTimes(plannedAt - t0, preparedAt - plannedAt, t1 - preparedAt, t2 - t1, 1, graphNanos,
                timed ? 1 : 0));
        return ids;
    }

    /** The greedy steps' host phases so far, summed ({@link CudaProbes#stepTimes}). */
    StepTimes stepTimes = StepTimes.NONE;
    /** When the step being run had its plan built, and sent (the phases of {@link #stepTimes}). */
    private long plannedAt, preparedAt;

    /** The lm head over logit rows [first, first + m) of the plan: gather their final hidden rows, then one GEMM. */
    void head(StepPlan plan, int first, int m) {
        k.embed(b.meta() + 4L * (plan.gather + first), b.x, b.picked, m, c.hiddenSize());
        linear.apply(b.picked, m, w.lmHead(), b.logits);
    }

    /**
     * Runs a step: decode steps (every window one row, wanting its logits) replay a CUDA graph
     * captured once per batch size, split bucket and tap layers (the launches of all layers, the
     * tap copies and the head, ~15 per layer, cost one launch); other steps launch kernel by kernel.
     */
    private StepPlan run(ModelStep step, boolean greedy) {
        List<Window> windows = step.windows();
        stepTaps = step.tapLayers();
        int splits = graphSplits(windows);
        if (step.feeds()) {
            if (sampling == null) {
                throw new IllegalArgumentException("a tensor-parallel rank without the head draws nothing to feed from");
            }
            sampling.drawn.checkFeeds(step, stepSerial);
        }
        stepSerial++; // before anything can throw: a failed step leaves no draws to feed from
        StepPlan p = prepare(step, splits);
        if (p.feeds > 0) {
            k.feedTokens(b.meta(), p.feedAt, p.feeds, sampling.drawn.device, c.vocabSize()); // after the upload, before the layers read the tokens
        }
        preparedAt = System.nanoTime();
        tapRows = stepTaps.length > 0 ? p.rows : 0;
        if (b.ensureTaps((long) stepTaps.length * p.rows * c.hiddenSize() * 2)) {
            graphs.drop(); // graphs of tapped steps hold the old buffer's address
        }
        if (splits == 0) {
            layers(p);
            return p;
        }
        MemorySegment graph;
        try {
            graph = graphs.graph(GraphKeys.key(windows, splits, greedy, stepTaps), () -> capture(p, greedy));
        } catch (CudaException e) {
            if (group == null) {
                throw e;
            }
            // one graph over several GPUs' streams has run on lanes of one GPU only: where a driver refuses it, the
            // ranks launch kernel by kernel (the same launches, so the same bits), slower but serving
            groupGraphsRefused = e.getMessage();
            LOG.log(System.Logger.Level.WARNING, "a decode step over " + group.size() + " tensor-parallel ranks could not be captured as"
                    + " one CUDA graph (" + e.getMessage() + "); this pass launches kernel by kernel from now on");
            graph = null;
        }
        if (graph == null) { // MAX_GRAPHS held, or the group's capture refused
            layers(p);
            return p;
        }
        graphs.launch(graph);
        p.headDone = true;
        return p;
    }

    /** A decode step's launches (and the head, and the argmax when greedy) captured as one graph on this pass's stream. */
    private MemorySegment capture(StepPlan p, boolean greedy) {
        // programmatic dependent launch between a stream's kernels; not where the ranks' streams wait for each other
        return GraphCapture.capture(cuda, group == null && k.dependentLaunches(), () -> {
            layers(p);
            head(p, 0, p.logitRows);
            if (greedy) {
                k.argmax(b.logits, p.logitRows, c.vocabSize(), sampling.drawn.device);
            }
        });
    }

    /** Why a tensor-parallel group's steps run without graphs (a capture over its ranks' streams was refused), or null. */
    private String groupGraphsRefused;

    /** The step's split bucket where it replays a graph (graphs on, none refused: {@link GraphKeys#splits}), else 0. */
    private int graphSplits(List<Window> windows) {
        return opt.cudaGraphs() && groupGraphsRefused == null ? GraphKeys.splits(windows, b.logitRowsMax) : 0;
    }

    /** Uploads the step's integers (one copy); the device buffers they need are in place. */
    StepPlan prepare(ModelStep step, int fixedSplits) {
        List<Window> windows = step.windows();
        int n = step.rows();
        if (n > opt.maxStepRows()) {
            throw new IllegalArgumentException(n + " rows in one step exceed the CUDA backend's " + opt.maxStepRows() + " (max step rows)");
        }
        ForwardPass.checkWindows(this, step);
        int kernel = prefill.forKeys(PrefillKernelChoice.keysOf(windows));
        StepPlan p = new StepPlan(windows, c.numHeads() / c.numKvHeads(), c.numKvHeads(), fixedSplits,
                AttentionKernels.attentionTileRows(kernel), step.fed());
        p.prefillKernel = kernel;
        boolean moved = b.ensureMeta(p.data.length);
        b.ensureRope(p.maxPosition + 1);
        moved |= b.ensurePartials(p.partials);
        if (group != null) {
            moved |= group.prepare(step, fixedSplits); // the other ranks' plans (a captured step holds their buffers too)
        }
        if (moved) {
            graphs.drop(); // graphs hold the old buffers' addresses
            movedSinceTaken = true;
        }
        // the previous step's copy from metaHost may still wait in the stream (a step without logits returns without a sync, and
        // several such steps, a long prompt's chunks, run ahead of the GPU): it must have read the buffer before it is rewritten
        plannedAt = System.nanoTime();
        cuda.syncEvent(metaUploaded);
        MemorySegment.copy(p.data, 0, b.metaHost(), ValueLayout.JAVA_INT, 0, p.data.length);
        cuda.copyToDeviceAsync(b.meta(), b.metaHost(), p.data.length * 4L);
        cuda.record(metaUploaded);
        if (group != null) {
            group.uploaded(); // this stream's next work (a step's launches, or its graph) after the other ranks' uploads
        }
        return p;
    }

    void layers(StepPlan p) {
        if (group != null) {
            group.layers(p);
            return;
        }
        launches(p).run();
    }

    /** A step's decoder launches ({@link DecoderProgram} over {@link CudaDecoderOps}), in order, cut for a group's all-reduces. */
    Launches launches(StepPlan p) {
        CudaDecoderOps ops = new CudaDecoderOps(c, k, linear, pairing, w, b, kv, opt.blockSize(), p, this::op);
        DecoderProgram.run(c, stepTaps, ops);
        return ops.launches;
    }

    /** Seconds per operation kind while a probe profiles a step ({@link CudaProbes#profileStep}), else null. */
    java.util.Map<String, Double> profile;

    void op(String name, Runnable r) {
        if (profile == null) {
            r.run();
        } else {
            profile.merge(name, cuda.time(r), Double::sum);
        }
    }

    /** The bench's and the tests' probes into this pass (graph replays, kernel choices, step profiles). */
    public CudaProbes probes() {
        return new CudaProbes(this);
    }

    @Override
    public void close() {
        if (group != null) {
            group.close();
            group = null;
        }
        cuda.makeCurrent();
        graphs.close();
        b.close();
        kv.close();
        if (sampling != null) {
            sampling.close();
        }
        linear.close();
        pairing.paired.close();
        cuda.destroyEvent(metaUploaded);
        w.close();
    }

    /** Keeps the paired launches only where whole decode steps run faster with them ({@link PairingChoice#decide}). */
    void choosePairing() {
        PairingChoice.decide(this, opt.cudaGraphs());
    }

    /**
     * Makes this pass (rank 0) the leader of a tensor-parallel group with {@code others}: its {@link #execute} runs every
     * rank and it closes them with itself. The paired launches are off on every rank (PairingChoice times whole steps of
     * one pass, not of a group).
     */
    void leadTensorParallel(List<CudaForwardPass> others) {
        for (CudaForwardPass p : others) {
            p.pairing.off("off (tensor parallelism)");
        }
        pairing.off("off (tensor parallelism)");
        group = new TensorParallelGroup(this, others);
    }

    /** One line per weight shape: the GEMM algorithms pinned, where linear_rows runs, and their timings. */
    public List<String> gemmChoices() {
        return PassGemms.choices(linear, pairing);
    }
}

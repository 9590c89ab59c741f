package dev.spindle.backend.cuda;

import dev.spindle.step.KvCapacity;

import dev.spindle.step.ForwardPass;
import dev.spindle.backend.DecoderProgram;
import dev.spindle.backend.KeySplits;
import dev.spindle.step.ModelStep;
import dev.spindle.step.ModelStep.Draw;
import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.StepOutput;
import dev.spindle.model.Bf16;
import dev.spindle.model.ModelConfig;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
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
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /**
     * Sizes of the pass: tokens per KV block, rows per step, the share of free memory the KV pool takes, an optional block cap;
     * whether decode steps replay CUDA graphs; where the pinned GEMM algorithms are cached (null: searched at every start); device
     * memory to leave for a draft model opened next (its weights and buffers, and its KV bytes per token for as many tokens as this pool).
     */
    public record Options(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs,
                          java.nio.file.Path gemmCache, long reserveBytes, long extraKvBytesPerToken) {
        public Options {
            if (blockSize < 1 || maxStepRows < 1 || kvMemoryFraction <= 0 || kvMemoryFraction > 1 || reserveBytes < 0 || extraKvBytesPerToken < 0) {
                throw new IllegalArgumentException("invalid CUDA options " + blockSize + ", " + maxStepRows + ", " + kvMemoryFraction + ", "
                        + reserveBytes + ", " + extraKvBytesPerToken);
            }
            if (Integer.bitCount(blockSize) != 1) {
                // the attention kernels find a key's block and offset by shift and mask
                throw new IllegalArgumentException("the CUDA backend needs a KV block size (--block-size, spindle.block-size) that is a power of two"
                        + " (1, 2, 4, ... 16, 32, ...), got " + blockSize);
            }
        }

        /** Nothing left for another model on the device. */
        public Options(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs, java.nio.file.Path gemmCache) {
            this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, 0, 0);
        }

        /** Without a GEMM algorithm cache. */
        public Options(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs) {
            this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, null);
        }
    }

    /** The model's config (what {@link #config()} gives); {@code c} is the shapes this pass computes (one rank's under tensor parallelism). */
    private final ModelConfig model;
    private final ModelConfig c;
    private final CudaDriver cuda;
    private final CudaKernels k;
    private final CublasLt lt;
    private final Linear linear;
    /** gate|up with SwiGLU and q|k|v with rope_kv_write in one launch each, where that is faster (decode steps on Hopper). */
    private final PairedLaunches pairing;
    private final CudaWeights w;
    private final Options opt;
    private final KvPool kv;
    private final StepBuffers b;
    /** Which prefill attention kernel a step runs, of those loaded for this head dim. */
    private final PrefillKernelChoice prefill;
    /** Recorded after each copy from {@link #metaHost}: the next step rewrites the buffer only once it has been read. */
    private final MemorySegment metaUploaded;
    /** Captured graphs kept at most (one per step shape); a step of a new shape beyond it launches kernel by kernel. */
    static final int MAX_GRAPHS = 512;
    /** The decode steps' captured graphs, by {@link #graphKey}. */
    private final GraphCache graphs;
    /** The head's draws and logits read back; null on a tensor-parallel group's other ranks (no head). */
    private final DeviceSampling sampling;
    /** Steps run on this pass (the serial {@link DrawnIds} keeps track of). */
    private long stepSerial;
    private int tapRows; // rows of the last step's taps (0: none)
    private int[] stepTaps = new int[0];
    /** Whether this pass computes the head (every pass but a tensor-parallel group's other ranks). */
    private final boolean head;
    /** The other ranks, where this pass leads a tensor-parallel group; null otherwise. */
    private TensorParallelGroup group;
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

    public CudaForwardPass(ModelConfig config, CudaKernels kernels, CublasLt lt, CudaWeights weights, Options options) {
        this(config, config, kernels, lt, null, weights, options, true);
    }

    /**
     * A pass computing {@code shapes} (a tensor-parallel rank's heads and columns: {@link dev.spindle.backend.TensorParallelLayout#rankConfig})
     * of {@code model}; with {@code partialLt} (fp32 outputs) its o_proj and down_proj write partials for the group's all-reduce;
     * the head only where {@code head}.
     */
    CudaForwardPass(ModelConfig model, ModelConfig config, CudaKernels kernels, CublasLt lt, CublasLt partialLt, CudaWeights weights, Options options,
                    boolean head) {
        this.model = model;
        this.head = head;
        this.metaUploaded = kernels.driver().createEvent();
        if (!CudaKernels.supportsHeadDim(config.headDim())) {
            throw new CudaException("head_dim " + config.headDim() + " is not supported by the CUDA attention kernel (16, 32, 64 or 128)");
        }
        if (config.hiddenSize() % 8 != 0) {
            throw new CudaException("hidden_size " + config.hiddenSize() + " is not a multiple of 8, which the CUDA norm kernels need");
        }
        if (config.numHeads() / config.numKvHeads() > 16) {
            throw new CudaException("more than 16 query heads per KV head are not supported by the CUDA attention kernel (one MMA tile per KV head)");
        }
        this.c = config;
        this.k = kernels;
        this.cuda = kernels.driver();
        this.graphs = new GraphCache(cuda, MAX_GRAPHS);
        this.lt = lt;
        this.linear = new Linear(kernels, lt);
        this.pairing = new PairedLaunches(new PairedLinear(kernels, linear), config, options.blockSize(), weights.layer(0));
        this.w = weights;
        this.opt = options;
        this.prefill = new PrefillKernelChoice(kernel -> kernels.hasAttention(config.headDim(), kernel));
        int n = options.maxStepRows(), h = c.hiddenSize(), qkvDim = c.qDim() + 2 * c.kvDim(), in = c.intermediateSize();
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
        CudaWeights.Layer layer0 = w.layer(0);
        linear.prepare(layer0.qkv());
        linear.prepare(layer0.gateUp());
        pairing.prepare(layer0);
        if (b.partial == null) {
            linear.prepare(layer0.o());
            linear.prepare(layer0.down());
        } else {
            linear.preparePartial(layer0.o());
            linear.preparePartial(layer0.down());
        }
        if (head) {
            linear.prepare(w.lmHead());
        }
        long tGemms = System.nanoTime();
        // the few-row kernel's tensor maps: every weight it may read, and the buffers the linear layers read
        for (int l = 0; l < c.numLayers(); l++) {
            CudaWeights.Layer layer = w.layer(l);
            linear.weight(layer.qkv());
            linear.weight(layer.gateUp());
            pairing.weights(layer);
            if (b.partial == null) {
                linear.weight(layer.o());
                linear.weight(layer.down());
            }
        }
        linear.input(b.xn, n, h);
        if (b.partial == null) {
            linear.input(b.att, n, c.qDim());
            linear.input(b.act, n, in);
        }
        if (head) {
            linear.weight(w.lmHead());
            linear.input(b.picked, b.logitRowsMax, h);
        }
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
        List<float[][]> out = new ArrayList<>();
        List<int[]> drawn = new ArrayList<>();
        List<float[][]> taps = readTaps(step, plan);
        for (int wi = 0, j = 0; wi < windows.size(); wi++) {
            int rows = plan.logitCounts[wi];
            if (windows.get(wi).draw() != null) {
                drawn.add(java.util.Arrays.copyOfRange(rowTokens, j, j + rows));
                out.add(new float[0][]);
                j += rows;
                continue;
            }
            float[][] wl = new float[rows][];
            for (int r = 0; r < rows; r++) {
                wl[r] = all[j++];
            }
            out.add(wl);
            drawn.add(null);
        }
        return new StepOutput(out, drawn, taps);
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
        return () -> {
            int[] ids = copy.ids();
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
                tokens.add(java.util.Arrays.copyOfRange(ids, j, j + counts[wi]));
                j += counts[wi];
            }
            return new StepOutput(out, tokens, java.util.Collections.nCopies(windows.size(), null));
        };
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

    /** Per window, its rows' residual stream after each tap layer ([row][tap x hidden + i]) when it asked, else null. */
    private List<float[][]> readTaps(ModelStep step, StepPlan plan) {
        List<float[][]> out = new ArrayList<>();
        int[] taps = step.tapLayers();
        int h = c.hiddenSize(), n = plan.rows;
        if (!step.tapsToHost()) { // the reader takes them from tapBuf (deviceTaps)
            for (int wi = 0; wi < step.windows().size(); wi++) {
                out.add(null);
            }
            return out;
        }
        short[] bits = null;
        if (taps.length > 0) {
            bits = new short[taps.length * n * h];
            try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
                MemorySegment host = a.allocate((long) bits.length * 2);
                cuda.copyToHost(host, b.taps());
                MemorySegment.copy(host, BF16, 0, bits, 0, bits.length);
            }
        }
        for (int wi = 0, row = 0; wi < step.windows().size(); wi++) {
            Window w = step.windows().get(wi);
            if (!w.tap() || taps.length == 0) {
                out.add(null);
            } else {
                float[][] rows = new float[w.tokens().length][taps.length * h];
                for (int r = 0; r < rows.length; r++) {
                    for (int t = 0; t < taps.length; t++) {
                        int base = (t * n + row + r) * h;
                        for (int i = 0; i < h; i++) {
                            rows[r][t * h + i] = Bf16.toFloat(bits[base + i]);
                        }
                    }
                }
                out.add(rows);
            }
            row += w.tokens().length;
        }
        return out;
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

    /** The greedy steps' host phases so far, summed (the bench reads them before and after its steps). */
    public StepTimes stepTimes() {
        return stepTimes;
    }

    /**
     * Bench: whether each greedy step's graph is timed on the GPU from its launch on ({@link StepTimes#graphNanos}), by
     * timing events recorded before and after the launch.
     */
    public void timeGraphs(boolean on) {
        graphs.time(on);
    }

    private StepTimes stepTimes = StepTimes.NONE;
    /** When the step being run had its plan built, and sent (the phases of {@link #stepTimes}). */
    private long plannedAt, preparedAt;

    /** The lm head over logit rows [first, first + m) of the plan: gather their final hidden rows, then one GEMM. */
    private void head(StepPlan plan, int first, int m) {
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

    /** Whether a step has replayed a graph that is still held ({@link #replayLastGraph} has one to replay). */
    public boolean replayedAGraph() {
        return graphs.launchedAny();
    }

    /**
     * Bench: the last graph-eligible step's graph replayed {@code n} times back to back, then one wait; seconds a replay.
     * Each replay is that step's work again (its rows, positions, KV slots and tokens; a greedy graph's argmax writes its ids
     * into {@link DrawnIds}, apart from the plan). Against a step's wall time it gives what the host's part of a step costs:
     * building and sending the plan, launching, waiting for and reading the ids.
     */
    public double replayLastGraph(int n) {
        cuda.makeCurrent();
        return graphs.replayLast(n);
    }

    /** A decode step's launches (and the head, and the argmax when greedy) captured as one graph on this pass's stream. */
    private MemorySegment capture(StepPlan p, boolean greedy) {
        // programmatic dependent launch between a stream's kernels; not where the ranks' streams wait for each other
        return cuda.capture(group == null, () -> {
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
                CudaKernels.attentionTileRows(kernel), step.fed());
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

    private void layers(StepPlan p) {
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

    /**
     * Runs paired variant v for both epilogues in steps of up to 8 rows, whatever the timing and PairingChoice chose: for
     * tests of the paired launches inside whole steps. Drops the captured graphs.
     */
    void usePairedVariant(CudaKernels.LinearRowsVariant v) {
        if (!pairing.shapes || group != null) {
            throw new IllegalStateException("this pass's shapes have no paired launches, or it leads a tensor-parallel group");
        }
        pairing.use(v, w);
        pairedEpilogues(true);
    }

    /** Whether the paired launches run where chosen ({@link #pairedEpilogues(boolean)}, PairingChoice). */
    public boolean pairedEpilogues() {
        return pairing.on();
    }

    /**
     * Runs the paired launches where PairedLinear chose them ({@code on}) or never: PairingChoice's switch, and for comparing
     * the two ways in one process on the same GEMM choices (the bench's decode_paired_epilogues). They compute the same
     * bits. Drops the captured graphs.
     */
    public void pairedEpilogues(boolean on) {
        if (group != null) {
            throw new IllegalStateException("paired epilogues are switched per pass, not over a tensor-parallel group");
        }
        cuda.makeCurrent();
        graphs.drop();
        pairing.on(on);
    }

    /**
     * The prefill kernel a step runs whose longest prefill window ends at key {@code keys} ({@link PrefillKernelChoice}; every
     * step's, when one was set: {@link #prefillAttentionKernel}).
     */
    int prefillKernel(int keys) {
        return prefill.forKeys(keys);
    }

    /** Whether prefill attention kernel {@code kernel} is loaded for this model's head dim on this GPU. */
    public boolean hasPrefillAttentionKernel(int kernel) {
        return prefill.loaded(kernel);
    }

    /**
     * Runs prefill attention with {@code kernel} (one of {@link CudaKernels#PREFILL_KERNELS}; they compute the
     * same values), or -1 to let the step's length pick. For comparing the kernels' speed.
     */
    public void prefillAttentionKernel(int kernel) {
        prefill.force(kernel);
    }

    private java.util.Map<String, Double> profile;

    void op(String name, Runnable r) {
        if (profile == null) {
            r.run();
        } else {
            profile.merge(name, cuda.time(r), Double::sum);
        }
    }

    /**
     * Runs one step kernel by kernel, timing each operation on the stream (seconds per
     * operation kind, summed over layers, plus "head"): where a step's time goes.
     */
    public java.util.Map<String, Double> profileStep(ModelStep step) {
        cuda.makeCurrent();
        profile = new java.util.LinkedHashMap<>();
        stepTaps = new int[0];
        tapRows = 0;
        try {
            StepPlan p = prepare(step, 0);
            layers(p);
            op("head", () -> head(p, 0, Math.min(b.logitRowsMax, p.logitRows)));
            return profile;
        } finally {
            profile = null;
        }
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

    /**
     * Keeps the paired launches only where whole decode steps run faster with them (PairingChoice): with CUDA graphs (what
     * decode steps run), where PairedLinear chose one for steps of up to 8 rows; off otherwise.
     */
    void choosePairing() {
        if (!pairing.planned()) {
            pairing.off("none chosen per shape");
        } else if (!opt.cudaGraphs()) {
            pairing.off("off (decode steps without CUDA graphs)");
        } else {
            pairing.decided(PairingChoice.choose(this));
        }
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
    public java.util.List<String> gemmChoices() {
        List<String> all = new ArrayList<>(linear.choices());
        all.addAll(pairing.paired.choices());
        if (pairing.choice() != null) {
            all.add(pairing.choice());
        }
        return all;
    }
}

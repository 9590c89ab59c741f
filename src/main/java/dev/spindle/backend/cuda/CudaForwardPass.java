package dev.spindle.backend.cuda;

import dev.spindle.backend.ForwardPass;
import dev.spindle.backend.KeySplits;
import dev.spindle.backend.cpu.RotaryTable;
import dev.spindle.backend.ModelStep;
import dev.spindle.backend.ModelStep.Draw;
import dev.spindle.backend.ModelStep.Window;
import dev.spindle.backend.StepOutput;
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
    private final PairedLinear paired;
    /** Whether this pass's shapes have paired kernels: intermediate size a multiple of 32, head dim 64 or 128. */
    private final boolean pairedShapes;
    private final CudaWeights w;
    private final Options opt;
    private final KvCapacity capacity;
    private final int slots;
    private final long kv;
    /** Bytes of one slot's (executed layer's) pool; the slots' pools lie one after another. */
    private final long slotBytes;
    private final RotaryTable rotary;
    /** Which prefill attention kernel a step runs, of those loaded for this head dim. */
    private final PrefillKernelChoice prefill;
    private final List<Long> buffers = new ArrayList<>();
    private final long x, xn, qkv, att, proj, gateUp, act, logits, picked;
    private final MemorySegment logitsHost;
    private final int logitRowsMax;
    private long meta;
    private MemorySegment metaHost;
    /** Recorded after each copy from {@link #metaHost}: the next step rewrites the buffer only once it has been read. */
    private final MemorySegment metaUploaded;
    private int metaInts;
    /** Captured graphs kept at most (one per step shape); a step of a new shape beyond it launches kernel by kernel. */
    static final int MAX_GRAPHS = 512;
    /** The decode steps' captured graphs, by {@link #graphKey}. */
    private final GraphCache graphs;
    /** Split slots a captured step may give its rows at most (each about 40 KB on the 33B shape: 2.6 GB). */
    static final long GRAPH_MAX_PARTIALS = 65536;
    private long cos, sin, partO, partML;
    private final DeviceDraws drawer;
    /** The ids steps draw here: fed to the next step on the device, copied back through two host slots. */
    private final DrawnIds drawn;
    /** Steps run on this pass (the serial {@link #drawn} keeps track of). */
    private long stepSerial;
    /** The residual rows after each tap layer of the current step (taps x rows x hidden, bf16), grown on demand. */
    private long tapBuf, tapCapacity;
    private int tapRows; // rows of the last step's taps (0: none)
    private int[] stepTaps = new int[0];
    private int ropeFilled, partialCapacity;
    /** A tensor-parallel rank's fp32 partial buffers (o_proj's, down_proj's: rows x hidden), or null at one rank. */
    private final long[] partial;
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
        return partial[i];
    }

    /** The row-parallel layers' output buffer (rows x hidden bf16), which the all-reduce writes. */
    long projBuffer() {
        return proj;
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
        this.paired = new PairedLinear(kernels, linear);
        this.w = weights;
        this.opt = options;
        this.rotary = new RotaryTable(c.headDim(), c.ropeTheta());
        this.prefill = new PrefillKernelChoice(kernel -> kernels.hasAttention(config.headDim(), kernel));
        int n = options.maxStepRows(), h = c.hiddenSize(), qkvDim = c.qDim() + 2 * c.kvDim(), in = c.intermediateSize();
        x = buffer((long) n * h * 2);
        xn = buffer((long) n * h * 2);
        qkv = buffer((long) n * qkvDim * 2);
        att = buffer((long) n * c.qDim() * 2);
        proj = buffer((long) n * h * 2);
        gateUp = buffer((long) n * 2 * in * 2);
        act = buffer((long) n * in * 2);
        logitRowsMax = Math.min(n, Math.max(1, (int) ((1L << 30) / ((long) c.vocabSize() * 2))));
        logits = head ? buffer((long) logitRowsMax * c.vocabSize() * 2) : 0;
        picked = head ? buffer((long) logitRowsMax * h * 2) : 0;
        ensureMeta(16 * n + 4096);
        logitsHost = head ? cuda.allocHost((long) logitRowsMax * c.vocabSize() * 2) : null;
        drawer = head ? new DeviceDraws(k, c.vocabSize(), n) : null;
        drawn = head ? new DrawnIds(cuda, n) : null;
        partial = partialLt == null ? null : new long[]{buffer((long) n * h * 4), buffer((long) n * h * 4)};
        cos = buffer((long) c.maxPositions() * c.headDim() / 2 * 4);
        sin = buffer((long) c.maxPositions() * c.headDim() / 2 * 4);
        ensureRope(Math.min(c.maxPositions(), 4096));
        ensurePartials(4096);
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
        linear.prepare(h, w.layer(0).qkv(), qkvDim);
        linear.prepare(h, w.layer(0).gateUp(), 2 * in);
        pairedShapes = PairedEpilogue.Swiglu.takes(in) && PairedEpilogue.RopeKvWrite.takes(c.headDim());
        if (pairedShapes) {
            paired.prepare(swigluShape(), h, w.layer(0).gateUp());
            paired.prepare(ropeShape(), h, w.layer(0).qkv());
        }
        if (partial == null) {
            linear.prepare(c.qDim(), w.layer(0).o(), h);
            linear.prepare(in, w.layer(0).down(), h);
        } else {
            linear.preparePartial(c.qDim(), w.layer(0).o(), h);
            linear.preparePartial(in, w.layer(0).down(), h);
        }
        if (head) {
            linear.prepare(h, w.lmHead(), c.vocabSize());
        }
        long tGemms = System.nanoTime();
        // the few-row kernel's tensor maps: every weight it may read, and the buffers the linear layers read
        for (int l = 0; l < c.numLayers(); l++) {
            linear.weight(w.layer(l).qkv(), h, qkvDim);
            linear.weight(w.layer(l).gateUp(), h, 2 * in);
            if (pairedShapes) {
                paired.weight(swigluShape(), w.layer(l).gateUp(), h);
                paired.weight(ropeShape(), w.layer(l).qkv(), h);
            }
            if (partial == null) {
                linear.weight(w.layer(l).o(), c.qDim(), h);
                linear.weight(w.layer(l).down(), in, h);
            }
        }
        linear.input(xn, n, h);
        if (partial == null) {
            linear.input(att, n, c.qDim());
            linear.input(act, n, in);
        }
        if (head) {
            linear.weight(w.lmHead(), h, c.vocabSize());
            linear.input(picked, logitRowsMax, h);
        }
        cuda.sync();
        long tMaps = System.nanoTime();
        slots = c.executedLayers();
        long bytesPerBlock = (long) slots * 2 * options.blockSize() * c.kvDim() * 2;
        long free = cuda.memInfo()[0];
        int blocks = kvBlocks(free, bytesPerBlock, options, c.numKvHeads());
        if (blocks < 1) {
            throw new CudaException("no device memory left for the KV pool: " + free + " bytes free after weights and activations");
        }
        slotBytes = (long) blocks * 2 * options.blockSize() * c.kvDim() * 2;
        kv = buffer((long) blocks * bytesPerBlock);
        cuda.memsetZero(kv, (long) blocks * bytesPerBlock);
        cuda.sync();
        capacity = new KvCapacity(blocks, options.blockSize());
        long tEnd = System.nanoTime();
        setupSeconds = java.util.Map.of("gemm_choices", (tGemms - tBuffers) / 1e9, "tensor_maps", (tMaps - tGemms) / 1e9,
                "kv_pool", (tEnd - tMaps) / 1e9);
    }

    /**
     * Device memory kept out of the KV pool's share: headroom for what the pass allocates after the pool (split-state and
     * tap buffers grown on demand, captured graphs).
     */
    static final long KV_POOL_SPARE_BYTES = 512L << 20;

    /**
     * KV blocks a pass's pool gets from {@code freeBytes} of device memory (after the weights and activations), at
     * {@code bytesPerBlock} a block over all executed layers: the options' share of it less {@link #KV_POOL_SPARE_BYTES}
     * and the memory reserved for a draft model opened next, which also needs {@code extraKvBytesPerToken} for each of the
     * pool's tokens; at most {@code maxKvBlocks} (where set), and no more than the attention kernels can number (a layer's
     * KV rows of one head's dims in 32 bits). 0 where nothing is left.
     */
    static int kvBlocks(long freeBytes, long bytesPerBlock, Options options, int kvHeads) {
        long budget = (long) (freeBytes * options.kvMemoryFraction()) - KV_POOL_SPARE_BYTES - options.reserveBytes();
        long perBlock = bytesPerBlock + options.extraKvBytesPerToken() * options.blockSize();
        long blocks = Math.min(Integer.MAX_VALUE - 1, Math.max(0, budget / perBlock));
        if (options.maxKvBlocks() > 0) {
            blocks = Math.min(blocks, options.maxKvBlocks());
        }
        return (int) Math.min(blocks, 0xFFFFFFFFL / (2L * kvHeads * options.blockSize()));
    }

    private long buffer(long bytes) {
        long p = cuda.alloc(bytes);
        buffers.add(p);
        return p;
    }

    /**
     * RoPE cos/sin tables (HF's bf16 values) on the device, filled for positions [0, ropeFilled). The
     * tables have room for every position the model allows, so their addresses never change (captured
     * graphs stay valid); rows are computed on demand, doubling, in parallel chunks, and only new ones.
     */
    private void ensureRope(int positions) {
        if (positions <= ropeFilled) {
            return;
        }
        int from = ropeFilled, upTo = Math.min(c.maxPositions(), Math.max(positions, 2 * ropeFilled)), half = c.headDim() / 2;
        int n = upTo - from, chunk = 4096;
        float[] cs = new float[n * half], sn = new float[n * half];
        java.util.stream.IntStream.range(0, (n + chunk - 1) / chunk).parallel().forEach(ch -> {
            int s = ch * chunk, len = Math.min(chunk, n - s);
            float[] c1 = new float[len * half], s1 = new float[len * half];
            rotary.fill(from + s, len, c1, s1);
            System.arraycopy(c1, 0, cs, s * half, c1.length);
            System.arraycopy(s1, 0, sn, s * half, s1.length);
        });
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            cuda.copyToDevice(cos + (long) from * half * 4, a.allocateFrom(ValueLayout.JAVA_FLOAT, cs));
            cuda.copyToDevice(sin + (long) from * half * 4, a.allocateFrom(ValueLayout.JAVA_FLOAT, sn));
        }
        ropeFilled = upTo;
    }

    /** The step-integer buffers (device and pinned host) hold at least {@code ints}; true when they moved. */
    private boolean ensureMeta(int ints) {
        if (ints <= metaInts) {
            return false;
        }
        int cap = Math.max(ints, 2 * metaInts);
        if (metaInts > 0) {
            cuda.sync();
            cuda.free(meta);
            cuda.freeHost(metaHost);
        }
        meta = cuda.alloc(cap * 4L);
        metaHost = cuda.allocHost(cap * 4L);
        metaInts = cap;
        return true;
    }

    /** Grows the tap buffer to hold bytes; true when it moved (graphs of tapped steps hold its address). */
    private boolean ensureTaps(long bytes) {
        if (bytes <= tapCapacity) {
            return false;
        }
        if (tapCapacity > 0) {
            cuda.sync();
            cuda.free(tapBuf);
        }
        tapBuf = cuda.alloc(bytes);
        tapCapacity = bytes;
        return true;
    }

    private boolean ensurePartials(int slotsNeeded) {
        if (slotsNeeded <= partialCapacity) {
            return false;
        }
        int cap = Math.max(slotsNeeded, 2 * partialCapacity);
        if (partialCapacity > 0) {
            cuda.sync();
            cuda.free(partO);
            cuda.free(partML);
            partialCapacity = 0; // nothing held if an allocation below fails
        }
        partO = cuda.alloc((long) cap * c.numHeads() * c.headDim() * 4);
        partML = cuda.alloc((long) cap * c.numHeads() * 2 * 4);
        partialCapacity = cap;
        return true;
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
        return capacity;
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
        return slotBytes * slots;
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
        rowDraws(windows, rowDraws, rowU);
        boolean toHost = false, anyDraw = false;
        for (Draw d : rowDraws) {
            toHost |= d == null;
            anyDraw |= d != null;
        }
        int slot = (int) (stepSerial & 1);
        if (anyDraw) {
            drawer.upload(rowDraws, rowU, plan.logitRows, slot); // a row not drawn here is skipped by the kernel
        }
        int V = c.vocabSize();
        int done = 0;
        float[][] all = new float[plan.logitRows][];
        while (done < plan.logitRows) {
            int m = Math.min(logitRowsMax, plan.logitRows - done);
            if (!plan.headDone) {
                head(plan, done, m);
            }
            if (anyDraw) {
                drawer.sample(logits, m, done, slot, drawn.device);
            }
            if (toHost) {
                MemorySegment host = logitsHost.asSlice(0, (long) m * V * 2);
                cuda.copyToHost(host, logits);
                short[] bits = new short[V];
                for (int r = 0; r < m; r++) {
                    if (rowDraws[done + r] != null) {
                        continue;
                    }
                    MemorySegment.copy(host, BF16, (long) r * V * 2, bits, 0, V);
                    float[] row = new float[V];
                    for (int i = 0; i < V; i++) {
                        row[i] = Bf16.toFloat(bits[i]);
                    }
                    all[done + r] = row;
                }
            }
            done += m;
        }
        // the drawn rows' ids (others: whatever the buffer held); not marked as the draws a next step may be fed from: only
        // a started step's (start) or greedy()'s are
        int[] rowTokens = anyDraw ? this.drawn.readNow(plan.logitRows) : null;
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

    /**
     * Per logit row (windows in order, each window's wanted rows in order, as the plan gathers them): its window's draw
     * and uniform, or null and 0 where the row's logits go to the host.
     */
    private static void rowDraws(List<Window> windows, Draw[] draws, double[] us) {
        for (int wi = 0, j = 0; wi < windows.size(); wi++) {
            Draw d = windows.get(wi).draw();
            for (int r = 0; r < windows.get(wi).logitRows().length; r++, j++) {
                draws[j] = d;
                us[j] = d == null ? 0 : d.u()[r];
            }
        }
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
        rowDraws(windows, rowDraws, rowU);
        StepPlan plan = run(step, false);
        drawer.upload(rowDraws, rowU, logitRows, (int) (stepSerial & 1));
        for (int done = 0; done < logitRows; done += logitRowsMax) {
            int m = Math.min(logitRowsMax, logitRows - done);
            if (!plan.headDone) {
                head(plan, done, m);
            }
            drawer.sample(logits, m, done, (int) (stepSerial & 1), drawn.device);
        }
        drawn.drew(stepSerial, logitRows);
        DrawnIds.Copy copy = drawn.copyBack(stepSerial, logitRows);
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
        return new DeviceTaps(tapBuf, tapRows, stepTaps.clone());
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
                cuda.copyToHost(host, tapBuf);
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
        for (int done = 0; done < plan.logitRows && !plan.headDone; done += logitRowsMax) {
            int m = Math.min(logitRowsMax, plan.logitRows - done);
            head(plan, done, m);
            k.argmax(logits, m, c.vocabSize(), drawn.device + 4L * done);
        }
        drawn.drew(stepSerial, plan.logitRows); // the next step may be fed from these ids
        int[] ids = drawn.readNow(plan.logitRows);
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
        k.embed(meta + 4L * (plan.gather + first), x, picked, m, c.hiddenSize());
        linear.apply(picked, m, c.hiddenSize(), w.lmHead(), c.vocabSize(), logits);
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
            if (drawn == null) {
                throw new IllegalArgumentException("a tensor-parallel rank without the head draws nothing to feed from");
            }
            drawn.checkFeeds(step, stepSerial);
        }
        stepSerial++; // before anything can throw: a failed step leaves no draws to feed from
        StepPlan p = prepare(step, splits);
        if (p.feeds > 0) {
            k.feedTokens(meta, p.feedAt, p.feeds, drawn.device, c.vocabSize()); // after the upload, before the layers read the tokens
        }
        preparedAt = System.nanoTime();
        tapRows = stepTaps.length > 0 ? p.rows : 0;
        if (ensureTaps((long) stepTaps.length * p.rows * c.hiddenSize() * 2)) {
            graphs.drop(); // graphs of tapped steps hold the old buffer's address
        }
        if (splits == 0) {
            layers(p);
            return p;
        }
        MemorySegment graph;
        try {
            graph = graphs.graph(graphKey(windows, splits, greedy, stepTaps), () -> capture(p, greedy));
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
                k.argmax(logits, p.logitRows, c.vocabSize(), drawn.device);
            }
        });
    }

    /** Why a tensor-parallel group's steps run without graphs (a capture over its ranks' streams was refused), or null. */
    private String groupGraphsRefused;

    /**
     * The split bucket (the splits of a power of two of keys: KeySplits.count) of a graph-eligible step, or 0 when the
     * step runs without a graph. Eligible: windows short enough that each row's attention runs as a decode row
     * (StepPlan.rowwise: decode rows, drafted windows being verified, short prompt tails), each wanting some logits, all
     * logit rows in one pass of the head.
     */
    private int graphSplits(List<Window> windows) {
        return opt.cudaGraphs() && groupGraphsRefused == null ? graphSplits(windows, logitRowsMax) : 0;
    }

    /** {@link #graphSplits(List)} of a pass whose head takes up to {@code logitRowsMax} rows in one pass, graphs on. */
    static int graphSplits(List<Window> windows, int logitRowsMax) {
        if (windows.size() > logitRowsMax) {
            return 0;
        }
        int keys = KeySplits.MIN, logitRows = 0;
        for (Window w : windows) {
            int len = w.tokens().length, rows = w.logitRows().length;
            if (!StepPlan.rowwise(len) || rows == 0) {
                return 0;
            }
            logitRows += rows;
            // every row of a graph-eligible window is a decode row (StepPlan.rowwise): the bucket covers the last one's keys
            keys = Math.max(keys, w.start() + len);
        }
        // the splits of a power of two of keys (below 16K, a power of two of splits)
        int bucket = KeySplits.count(Integer.bitCount(keys) == 1 ? keys : Integer.highestOneBit(keys) << 1);
        int rows = windows.stream().mapToInt(w -> w.tokens().length).sum();
        // a graph gives every row the bucket's split slots: many short rows beside one long context would take gigabytes
        if (logitRows > logitRowsMax || (long) rows * bucket > GRAPH_MAX_PARTIALS) {
            return 0;
        }
        return bucket;
    }

    /**
     * A captured graph's shape: split bucket, greedy head, the step's rows and logit rows, the tap layers (their copies
     * into the tap buffer are part of the graph). Every row of a graph-eligible step
     * is a decode row (StepPlan.rowwise), so the launches (CTA counts, GEMM sizes, the head's rows) and every offset of the
     * step's integers depend on these four numbers only; which rows belong to which window, their positions, tables and the
     * rows whose logits are gathered are data in the uploaded plan. One graph thus serves every mix of decode rows and drafted
     * windows with the same row counts.
     */
    private static java.util.List<Integer> graphKey(List<Window> windows, int splits, boolean greedy, int[] taps) {
        int rows = 0, logitRows = 0;
        for (Window w : windows) {
            rows += w.tokens().length;
            logitRows += w.logitRows().length;
        }
        List<Integer> key = new ArrayList<>(List.of(splits, greedy ? 1 : 0, rows, logitRows));
        for (int t : taps) {
            key.add(t);
        }
        return List.copyOf(key);
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
        boolean moved = ensureMeta(p.data.length);
        ensureRope(p.maxPosition + 1);
        moved |= ensurePartials(p.partials);
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
        MemorySegment.copy(p.data, 0, metaHost, ValueLayout.JAVA_INT, 0, p.data.length);
        cuda.copyToDeviceAsync(meta, metaHost, p.data.length * 4L);
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
        for (List<Runnable> segment : program(p).segments()) {
            segment.forEach(Runnable::run);
        }
    }

    /**
     * A step's launches, in order, cut after each row-parallel GEMM (o_proj, down_proj) of a tensor-parallel rank: the
     * next segment reads proj, which the group's all-reduce fills from every rank's partial ({@link TensorParallelGroup}).
     * At one rank there is no cut (the GEMMs write proj in bf16) and the segments run back to back.
     *
     * @param cutBuffers per cut, the partial buffer (0: o_proj's, 1: down_proj's) its GEMM wrote
     */
    record Program(List<List<Runnable>> segments, List<Integer> cutBuffers) {
        Program() {
            this(new ArrayList<>(List.of(new ArrayList<>())), new ArrayList<>());
        }

        void add(Runnable launch) {
            segments.getLast().add(launch);
        }

        void cut(int buffer) {
            cutBuffers.add(buffer);
            segments.add(new ArrayList<>());
        }
    }

    Program program(StepPlan p) {
        Program prog = new Program();
        int n = p.rows, h = c.hiddenSize(), qd = c.qDim(), kvd = c.kvDim(), in = c.intermediateSize(), stride = qd + 2 * kvd;
        float eps = c.rmsNormEps(), scale = (float) Math.pow(c.headDim(), -0.5);
        long m = meta;
        prog.add(() -> op("embed", () -> k.embed(m + 4L * p.tokens, w.embedding(), x, n, h)));
        boolean pending = false;
        for (int loop = 0; loop < c.numLoops(); loop++) {
            for (int l = 0; l < c.numLayers(); l++) {
                CudaWeights.Layer lw = w.layer(l);
                int slot = l + loop * c.numLayers();
                if (pending) {
                    prog.add(() -> op("norms", () -> k.addRmsNorm(x, proj, lw.inputNorm(), xn, n, h, eps)));
                } else {
                    prog.add(() -> op("norms", () -> k.rmsNorm(x, lw.inputNorm(), xn, n, h, eps)));
                }
                // one layer's blocks stay within few pages
                long kvSlot = kv + slot * slotBytes;
                if (pairs(true, n)) {
                    prog.add(() -> op("gemm qkv + rope_kv_write", () -> paired.apply(rope(p, m, kvSlot), xn, n, h, lw.qkv(), qkv, 0)));
                } else {
                    prog.add(() -> op("gemm qkv", () -> linear.apply(xn, n, h, lw.qkv(), stride, qkv)));
                    prog.add(() -> op("rope_kv_write", () -> k.ropeKvWrite(qkv, stride, cos, sin, m + 4L * p.positions, n, c.numHeads(), c.numKvHeads(),
                            c.headDim(), kvSlot, m + 4L * p.slotMap, opt.blockSize())));
                }
                int heads = c.numHeads(), kvh = c.numKvHeads(), hd = c.headDim(), bs = opt.blockSize();
                long tables = m + 4L * p.tables, desc = m + 4L * p.desc, cdesc = m + 4L * p.cdesc;
                if (p.decodeRows > 0) {
                    prog.add(() -> op("attention decode splits", () -> k.attention(CudaKernels.DECODE, p.decodeCtas, qkv, stride, att, kvSlot, tables, desc,
                            partO, partML, heads, kvh, hd, bs, scale)));
                    if (p.partials > 0) { // none when every decode row's CTA folds its splits itself (StepPlan.folds)
                        prog.add(() -> op("attention decode merge", () -> k.attentionMerge(p.decodeRows, p.mergeSplits, partO, partML, cdesc,
                                att, heads, hd)));
                    }
                }
                if (p.ctas > p.decodeCtas) {
                    int kernel = p.prefillKernel;
                    prog.add(() -> op("attention prefill", () -> k.attention(kernel, p.ctas - p.decodeCtas, qkv, stride, att, kvSlot, tables,
                            desc + 32L * p.decodeCtas, partO, partML, heads, kvh, hd, bs, scale)));
                }
                rowParallel(prog, "gemm o", att, n, qd, lw.o(), 0);
                prog.add(() -> op("norms", () -> k.addRmsNorm(x, proj, lw.postAttnNorm(), xn, n, h, eps)));
                if (pairs(false, n)) {
                    prog.add(() -> op("gemm gate_up + swiglu", () -> paired.apply(swigluShape(), xn, n, h, lw.gateUp(), act, gateUp)));
                } else {
                    prog.add(() -> op("gemm gate_up", () -> linear.apply(xn, n, h, lw.gateUp(), 2 * in, gateUp)));
                    prog.add(() -> op("swiglu", () -> k.swiglu(gateUp, act, n, in)));
                }
                rowParallel(prog, "gemm down", act, n, in, lw.down(), 1);
                pending = true;
                int executed = l + loop * c.numLayers();
                for (int t = 0; t < stepTaps.length; t++) {
                    if (stepTaps[t] == executed) {
                        // the residual stream after this layer is x + proj (the add is fused into the next norm): written out here
                        long dst = tapBuf + (long) t * n * h * 2;
                        prog.add(() -> k.residualSum(dst, x, proj, (long) n * h));
                    }
                }
            }
            if (!c.skipLoopFinalNorm() || loop == c.numLoops() - 1) {
                prog.add(() -> op("norms", () -> {
                    k.residualAdd(x, proj, (long) n * h);
                    k.rmsNorm(x, w.finalNorm(), x, n, h, eps);
                }));
                pending = false;
            }
        }
        return prog;
    }

    /** The paired SwiGLU of this pass's gate|up ({@link PairedLinear}). */
    private PairedEpilogue.Swiglu swigluShape() {
        return new PairedEpilogue.Swiglu(c.intermediateSize());
    }

    /** The sizes of this pass's paired rope_kv_write (the pointers of a step: {@link #rope}). */
    private PairedEpilogue.RopeKvWrite ropeShape() {
        return new PairedEpilogue.RopeKvWrite(0, 0, 0, c.numHeads(), c.numKvHeads(), c.headDim(), 0, 0, opt.blockSize());
    }

    /** rope_kv_write of step p's rows (its integers at device address m) into one KV slot's pool. */
    private PairedEpilogue.RopeKvWrite rope(StepPlan p, long m, long kvSlot) {
        return new PairedEpilogue.RopeKvWrite(cos, sin, m + 4L * p.positions, c.numHeads(), c.numKvHeads(), c.headDim(), kvSlot,
                m + 4L * p.slotMap, opt.blockSize());
    }

    /** Whether n rows run q|k|v and rope_kv_write ({@code rope}), or gate|up and SwiGLU, as one paired launch. */
    private boolean pairs(boolean rope, int n) {
        return pairedShapes && pairedOn && paired.pairs(rope ? ropeShape() : swigluShape(), c.hiddenSize(), n);
    }

    /** Whether the paired launches run where {@link PairedLinear} chose them, or never (PairingChoice decides at open). */
    private boolean pairedOn = true;

    /**
     * Runs paired variant v for both epilogues in steps of up to 8 rows, whatever the timing and PairingChoice chose: for
     * tests of the paired launches inside whole steps. Drops the captured graphs.
     */
    void usePairedVariant(CudaKernels.LinearRowsVariant v) {
        if (!pairedShapes || group != null) {
            throw new IllegalStateException("this pass's shapes have no paired launches, or it leads a tensor-parallel group");
        }
        int h = c.hiddenSize();
        paired.use(swigluShape(), h, v);
        paired.use(ropeShape(), h, v);
        for (int l = 0; l < c.numLayers(); l++) {
            paired.weight(swigluShape(), w.layer(l).gateUp(), h);
            paired.weight(ropeShape(), w.layer(l).qkv(), h);
        }
        pairedEpilogues(true);
    }

    /** Whether the paired launches run where chosen ({@link #pairedEpilogues(boolean)}, PairingChoice). */
    public boolean pairedEpilogues() {
        return pairedOn;
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
        pairedOn = on;
    }

    /**
     * A row-parallel linear layer (o_proj, down_proj) into proj: at one rank its bf16 output; at several, this rank's fp32
     * partial into partial buffer {@code buffer}, and a cut, after which the group's all-reduce writes proj.
     */
    private void rowParallel(Program prog, String name, long in, int n, int k, long weight, int buffer) {
        int h = c.hiddenSize();
        if (partial == null) {
            prog.add(() -> op(name, () -> linear.apply(in, n, k, weight, h, proj)));
        } else {
            long out = partial[buffer];
            prog.add(() -> op(name, () -> linear.applyPartial(in, n, k, weight, h, out)));
            prog.cut(buffer);
        }
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
            op("head", () -> head(p, 0, Math.min(logitRowsMax, p.logitRows)));
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
        for (long b : buffers) {
            cuda.free(b);
        }
        buffers.clear();
        if (partialCapacity > 0) {
            cuda.free(partO);
            cuda.free(partML);
        }
        if (drawer != null) {
            drawer.close();
        }
        if (drawn != null) {
            drawn.close();
        }
        linear.close();
        paired.close();
        if (tapCapacity > 0) {
            cuda.free(tapBuf);
        }
        cuda.free(meta);
        cuda.freeHost(metaHost);
        cuda.destroyEvent(metaUploaded);
        if (logitsHost != null) {
            cuda.freeHost(logitsHost);
        }
        w.close();
    }

    /** What {@link PairingChoice} (or its absence) decided, for the GEMM choices; null until decided. */
    private String pairingChoice;

    /**
     * Keeps the paired launches only where whole decode steps run faster with them (PairingChoice): with CUDA graphs (what
     * decode steps run), where PairedLinear chose one for steps of up to 8 rows; off otherwise.
     */
    void choosePairing() {
        boolean planned = pairedShapes && (paired.pairs(ropeShape(), c.hiddenSize(), 1) || paired.pairs(swigluShape(), c.hiddenSize(), 1));
        if (!planned) {
            pairedOn = false;
            pairingChoice = "paired launches: none chosen per shape";
        } else if (!opt.cudaGraphs()) {
            pairedOn = false;
            pairingChoice = "paired launches: off (decode steps without CUDA graphs)";
        } else {
            pairingChoice = PairingChoice.choose(this);
        }
    }

    /**
     * Makes this pass (rank 0) the leader of a tensor-parallel group with {@code others}: its {@link #execute} runs every
     * rank and it closes them with itself. The paired launches are off on every rank (PairingChoice times whole steps of
     * one pass, not of a group).
     */
    void leadTensorParallel(List<CudaForwardPass> others) {
        for (CudaForwardPass p : others) {
            p.pairedOn = false;
        }
        pairedOn = false;
        pairingChoice = "paired launches: off (tensor parallelism)";
        group = new TensorParallelGroup(this, others);
    }

    /** One line per weight shape: the GEMM algorithms pinned, where linear_rows runs, and their timings. */
    public java.util.List<String> gemmChoices() {
        List<String> all = new ArrayList<>(linear.choices());
        all.addAll(paired.choices());
        if (pairingChoice != null) {
            all.add(pairingChoice);
        }
        return all;
    }
}

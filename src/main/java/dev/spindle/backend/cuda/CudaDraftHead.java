package dev.spindle.backend.cuda;

import dev.spindle.backend.CandidateSelector;
import dev.spindle.backend.ContextHead;
import dev.spindle.backend.DraftContexts;
import dev.spindle.backend.RotaryTable;
import dev.spindle.model.Bf16;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.Tensor;
import dev.spindle.sample.Sampler;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A DFlash / DFlash2 draft head on the GPU, beside a CUDA target: its weights on the target's device,
 * its forward on the target's kernels (embedding, RMSNorm, RoPE, SwiGLU, residual adds, the linear layer
 * with its pinned GEMMs) and draft_head.cu's (the block's bidirectional attention over the head's
 * context, DFlash2's dynamic convolutions, the logits' multiplier and soft-cap), every drafting sequence's block in
 * one forward. Drafts are picked on the device, only ids (and a sampled walk's q) coming back: DFlash's greedy ones
 * by argmax, DFlash2's greedy and sampled ones by draft_head.cu's selector_walk (the bits of CandidateSelector's walk;
 * top-k up to 32, rank up to 1024, else the host walk). DFlash's sampled drafts read the rows' logits on the host
 * (the sampler's distribution). Per sequence its context K/V live in device arrays that grow by doubling; the
 * context rows come from the target's tap buffer on the device, or from the host. Same rounding points as the CPU head except the attention's
 * (an online softmax), so its parity is gated as the CPU head's: KL to the fp32 reference.
 */
public final class CudaDraftHead extends ContextHead<CudaDraftHead.Context> {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final CudaDriver cuda;
    private final CudaKernels k;
    private final CudaForwardPass target;
    private final Linear linear;
    private final long embedding;
    private final DeviceMatrix lmHead;
    private final int vocab;
    private final Map<String, Long> dw = new HashMap<>();
    private final Map<String, Tensor> host;
    private final List<Long> allocations = new ArrayList<>();
    private final RotaryTable rotary;
    private final int maxRows; // context rows injected in one call at most (more are injected in pieces)
    /** Sequences drafted in one forward at most (more go in several). */
    static final int DRAFT_SEQUENCES = 16;
    // a forward's buffers (DRAFT_SEQUENCES blocks of rows at most); pos: 0, 1, 2, ... (a forward's or an injection's rows
    // index their own rotary rows)
    private final long pos, x, xn, conv, q, kb, vb, att, o, gateUp, act, mlp, dyn, logits, argmaxOut, proj, picked;
    // a forward's staged inputs (draftStaging on the host, dmeta on the device, the same layout): ints ids, inBlock,
    // rowSeq, gather (a forward's rows each), seqs (5 a sequence), then bytes: per layer and sequence its context's K and
    // V addresses, the rows' cos and sin
    private final long dmeta;
    private final int dsIds = 0, dsInBlock, dsRowSeq, dsGather, dsSeqs;
    private final long dsCtx, dsCos, dsSin, dsU;
    // the walk's results: ids (a forward's rows), then for a sampled walk each row's candidates (ints) and their q
    private final long walkOut, walkCand, walkQ, walkParts; // walkParts: the first pass of the rows' top-k (DFlash2)
    private final MemorySegment draftStaging;
    private int lastFirst;
    // injection buffers (maxRows rows)
    private final long feat, ctx, ck, cv, irope;
    private final boolean deviceWalk; // DFlash2's walk on the device (its top-k and rank within the kernel's)
    /**
     * Captured block forwards, per (rows, drafted rows), and injections, per (-1, rows) with host taps or (-2, rows, tap buffer
     * rows, its address) with the target's; beyond MAX_GRAPHS they launch kernel by kernel.
     */
    private final GraphCache graphs;
    static final int MAX_GRAPHS = 256;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment logitsHost, idsHost, projHost, injectStaging;
    private float[][] lastLogits;
    private int lastDrafts;

    final class Context extends DraftContexts.Span {
        int capacity;
        long[] k = new long[c.layers()], v = new long[c.layers()];

        void ensure(int more) {
            if (rows + more <= capacity) {
                return;
            }
            int cap = Math.max(rows + more, Math.max(64, capacity * 2));
            long bytes = (long) cap * kvWidth() * 2;
            for (int l = 0; l < c.layers(); l++) {
                long nk = cuda.alloc(bytes), nv = cuda.alloc(bytes);
                if (rows > 0) {
                    cuda.copyDeviceToDevice(nk, k[l], (long) rows * kvWidth() * 2);
                    cuda.copyDeviceToDevice(nv, v[l], (long) rows * kvWidth() * 2);
                }
                if (capacity > 0) {
                    cuda.free(k[l]);
                    cuda.free(v[l]);
                }
                k[l] = nk;
                v[l] = nv;
            }
            capacity = cap;
        }

        void free() {
            if (capacity > 0) {
                for (int l = 0; l < c.layers(); l++) {
                    cuda.free(k[l]);
                    cuda.free(v[l]);
                }
            }
            capacity = 0;
        }
    }

    public CudaDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, CudaForwardPass target, int[] tapLayers) {
        this(config, weights, null, target, tapLayers, 0);
    }

    /**
     * A head of {@code config}'s shape with random weights made on the device (seeded; norms near 1, projections
     * scaled by 1 / sqrt(fan-in)) and zero codebooks on the host: what the cost benchmark drafts with.
     */
    public static CudaDraftHead dummy(DraftHeadConfig config, CudaForwardPass target, int[] tapLayers, long seed, Arena hostArena) {
        Map<String, Tensor> host = new java.util.LinkedHashMap<>();
        Map<String, long[]> device = new java.util.LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : config.expectedTensors().entrySet()) {
            if (e.getKey().contains("codebook")) { // read on the host by the walk
                host.put(e.getKey(), new Tensor(e.getKey(), e.getValue(), hostArena.allocate(2 * e.getValue()[0] * e.getValue()[1], 64)));
            } else {
                device.put(e.getKey(), e.getValue());
            }
        }
        return new CudaDraftHead(config, host, device, target, tapLayers, seed == 0 ? 1 : seed);
    }

    private CudaDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, Map<String, long[]> dummyShapes, CudaForwardPass target, int[] tapLayers,
                          long dummySeed) {
        super(config, tapLayers, Context::free);
        this.cuda = target.driver();
        this.graphs = new GraphCache(cuda, MAX_GRAPHS);
        cuda.makeCurrent();
        this.k = target.kernels();
        this.target = target;
        this.linear = target.linear();
        this.embedding = target.weights().embedding();
        this.lmHead = target.weights().lmHead();
        this.vocab = target.config().vocabSize();
        this.host = Map.copyOf(weights);
        this.rotary = new RotaryTable(config.headDim(), config.ropeTheta());
        if (config.headDim() % 32 != 0 || config.headDim() > 256) {
            throw new IllegalArgumentException("the CUDA draft head needs head_dim a multiple of 32 up to 256, got " + config.headDim());
        }
        int h = c.hidden(), kw = kvWidth(), qd = c.heads() * c.headDim(), in = c.intermediate(), b = c.blockSize();
        if (dummyShapes != null) {
            for (Map.Entry<String, long[]> e : dummyShapes.entrySet()) {
                if (e.getKey().endsWith("mlp.up_proj.weight")) {
                    continue;
                }
                long[] shape = e.getValue();
                long n = 1;
                for (long d : shape) {
                    n *= d;
                }
                boolean gate = e.getKey().endsWith("mlp.gate_proj.weight");
                long p = alloc(2 * n * (gate ? 2 : 1));
                boolean norm = shape.length == 1;
                k.fillDummy(p, n * (gate ? 2 : 1), dummySeed + dw.size(), norm ? 1f : 0f, norm ? 0.05f : (float) (1 / Math.sqrt(shape[shape.length - 1])));
                dw.put(gate ? e.getKey().replace("gate_proj", "gate_up") : e.getKey(), p);
            }
            for (Map.Entry<String, Tensor> e : weights.entrySet()) { // the zero codebooks, for the device walk too
                long p = alloc(e.getValue().data().byteSize());
                cuda.memsetZero(p, e.getValue().data().byteSize());
                dw.put(e.getKey(), p);
            }
        }
        for (Map.Entry<String, Tensor> e : (dummyShapes != null ? Map.<String, Tensor>of() : weights).entrySet()) {
            if (e.getKey().endsWith("mlp.up_proj.weight")) {
                continue; // up is fused after gate below (the codebooks go up too: the greedy walk runs on the device)
            }
            if (e.getKey().endsWith("mlp.gate_proj.weight")) {
                String up = e.getKey().replace("gate_proj", "up_proj");
                long p = alloc(2 * e.getValue().data().byteSize());
                cuda.copyToDevice(p, e.getValue().data());
                cuda.copyToDeviceAsync(p + e.getValue().data().byteSize(), weights.get(up).data(), weights.get(up).data().byteSize());
                cuda.sync();
                dw.put(e.getKey().replace("gate_proj", "gate_up"), p);
                continue;
            }
            long p = alloc(e.getValue().data().byteSize());
            cuda.copyToDevice(p, e.getValue().data());
            dw.put(e.getKey(), p);
        }
        this.maxRows = 512;
        int groups = c.kind() == DraftHeadConfig.Kind.DFLASH2 ? h / c.convGroup() : 1;
        int dynW = c.kind() == DraftHeadConfig.Kind.DFLASH2 ? 2 * c.convKernel() * groups : 1;
        int block = b;
        b = block * DRAFT_SEQUENCES; // rows of one forward at most
        dsInBlock = b;
        dsRowSeq = 2 * b;
        dsGather = 3 * b;
        dsSeqs = 4 * b;
        dsCtx = (4L * (dsSeqs + 5L * DRAFT_SEQUENCES) + 7) & ~7L;
        dsCos = dsCtx + 16L * c.layers() * DRAFT_SEQUENCES;
        dsSin = dsCos + 2L * b * c.headDim();
        dsU = dsSin + 2L * b * c.headDim(); // the sampled walk's uniforms (doubles, a drafted row each)
        long stagingBytes = dsU + 8L * b;
        dmeta = alloc(stagingBytes);
        draftStaging = cuda.allocHost(stagingBytes);
        pos = alloc(4L * Math.max(b, maxRows));
        picked = alloc(2L * b * h);
        x = alloc(2L * b * h);
        xn = alloc(2L * b * h);
        conv = alloc(2L * b * h);
        q = alloc(2L * b * qd);
        kb = alloc(2L * b * kw);
        vb = alloc(2L * b * kw);
        att = alloc(2L * b * qd);
        o = alloc(2L * b * h);
        gateUp = alloc(4L * b * in);
        act = alloc(2L * b * in);
        mlp = alloc(2L * b * h);
        dyn = alloc(2L * b * dynW);
        logits = alloc(2L * b * vocab);
        int topK = Math.max(1, c.selectorTopK());
        walkOut = alloc(4L * b + 8L * b * topK);
        walkCand = walkOut + 4L * b;
        walkQ = walkCand + 4L * b * topK;
        deviceWalk = c.kind() == DraftHeadConfig.Kind.DFLASH2 && c.selectorTopK() <= CudaKernels.SELECTOR_WALK_MAX_K
                && c.selectorRank() <= CudaKernels.SELECTOR_WALK_MAX_RANK;
        walkParts = deviceWalk ? alloc(CudaKernels.topKPartBytes(b, topK, vocab)) : 0;
        argmaxOut = walkOut;
        proj = alloc(2L * b * Math.max(1, c.selectorRank()));
        feat = alloc(2L * maxRows * taps.length * h);
        ctx = alloc(2L * maxRows * h);
        ck = alloc(2L * maxRows * kw);
        cv = alloc(2L * maxRows * kw);
        // an injection's cos and sin rows, then its K and V row addresses per layer: one copy
        irope = alloc(4L * maxRows * c.headDim() + 16L * maxRows * c.layers() + 4L * maxRows);
        logitsHost = arena.allocate(2L * block * vocab, 64); // one sequence's drafted rows, for the host's picks
        idsHost = arena.allocate(4L * b + 8L * b * topK, 64);
        projHost = arena.allocate(2L * block * Math.max(1, c.selectorRank()), 64);
        injectStaging = cuda.allocHost(2L * maxRows * taps.length * h + 4L * maxRows * c.headDim() + 16L * maxRows * c.layers() + 4L * maxRows);
        uploadInts(pos, java.util.stream.IntStream.range(0, Math.max(b, maxRows)).toArray());
        // the GEMM plans of the head's shapes, and the tensor maps of its weights and inputs
        prepare(taps.length * h, "fc.weight", h);
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".";
            prepare(h, p + "self_attn.q_proj.weight", qd);
            prepare(h, p + "self_attn.k_proj.weight", kw);
            prepare(h, p + "self_attn.v_proj.weight", kw);
            prepare(qd, p + "self_attn.o_proj.weight", h);
            prepare(h, p + "mlp.gate_up.weight", 2 * in);
            prepare(in, p + "mlp.down_proj.weight", h);
            if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
                prepare(h, p + "attention_conv.kernel_projection.weight", dynW);
                prepare(h, p + "mlp_conv.kernel_projection.weight", dynW);
            }
        }
        if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
            prepare(h, "candidate_selector.hidden_projection.weight", c.selectorRank());
        }
        linear.prepare(lmHead);
        for (long[] in2 : new long[][]{{feat, maxRows, taps.length * h}, {ctx, maxRows, h}, {xn, b, h}, {conv, b, h}, {att, b, qd}, {act, b, in}, {picked, b, h}}) {
            linear.input(in2[0], (int) in2[1], (int) in2[2]);
        }
    }

    private void prepare(int kIn, String weight, int nOut) {
        long w = dw.get(weight);
        linear.prepare(kIn, w, nOut);
        linear.weight(w, kIn, nOut);
    }

    private long alloc(long bytes) {
        long p = cuda.alloc(Math.max(bytes, 16));
        allocations.add(p);
        return p;
    }

    private long w(String name) {
        Long p = dw.get(name);
        if (p == null) {
            throw new IllegalStateException("the draft head has no tensor " + name + " on the device");
        }
        return p;
    }

    private int kvWidth() {
        return c.kvHeads() * c.headDim();
    }

    @Override
    protected void beforeRelease() {
        cuda.makeCurrent();
    }

    private void uploadInts(long dst, int[] values) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(4L * values.length, 16);
            m.copyFrom(MemorySegment.ofArray(values));
            cuda.copyToDevice(dst, m);
        }
    }

    /** Its target's steps keep their taps on the device, where injectAll reads them (a gather kernel, no host copy). */
    @Override
    public boolean readsDeviceTaps() {
        return true;
    }

    @Override
    public void inject(long id, int from, float[][] rows, int count) {
        injectAll(List.of(new Observation(id, from, rows, count)));
    }

    /**
     * Every sequence's rows together, in pieces of up to maxRows rows: one staged copy of the pieces' inputs
     * (the taps as bf16, each row's rotary factors at its position), fc, hidden_norm and each layer's k/v
     * projections, k_norm and RoPE over all rows, then one scatter_kv a layer writing each row's K and V after
     * its own context's rows. Nothing waits for the device at the end: the work runs while the engine samples
     * and plans, and the next draft's first copy waits for it.
     */
    @Override
    public void injectAll(List<Observation> batch) {
        cuda.makeCurrent();
        cuda.sync(); // the last injection's copies out of the staging buffer are done (the step between already waited)
        int h = c.hidden(), kw = kvWidth(), in = taps.length * h, half = c.headDim() / 2, L = c.layers();
        List<Context> owners = new ArrayList<>();
        List<float[]> rows = new ArrayList<>();
        List<Integer> positions = new ArrayList<>(), slots = new ArrayList<>(), stepRows = new ArrayList<>();
        java.util.Set<Long> seen = new java.util.HashSet<>();
        // taps kept on the device by the target's last step (the engine asked it to: readsDeviceTaps), or from the host
        boolean onDevice = batch.stream().anyMatch(o -> o.count() > 0 && o.taps() == null);
        CudaForwardPass.DeviceTaps dt = onDevice ? target.deviceTaps() : null;
        for (Observation o : batch) {
            if (o.count() == 0) {
                continue;
            }
            if (!seen.add(o.id())) {
                throw new IllegalArgumentException("sequence " + o.id() + " appears twice in one injection");
            }
            if ((o.taps() == null) != onDevice) {
                throw new IllegalArgumentException("an injection mixes taps on the host and on the device");
            }
            if (onDevice && (!java.util.Arrays.equals(dt.layers(), taps) || o.stepRow() < 0 || o.stepRow() + o.count() > dt.rows())) {
                throw new IllegalStateException("sequence " + o.id() + "'s rows " + o.stepRow() + ".." + (o.stepRow() + o.count()) + " are not in the target's last step's taps ("
                        + dt.rows() + " rows of layers " + java.util.Arrays.toString(dt.layers()) + ", the head reads " + java.util.Arrays.toString(taps) + ")");
            }
            Context cx = contexts.extendAt(o.id(), o.from(), Context::new);
            cx.ensure(o.count()); // before any row's address is taken: growing moves the arrays
            for (int r = 0; r < o.count(); r++) {
                owners.add(cx);
                rows.add(onDevice ? null : o.taps()[r]);
                stepRows.add(o.stepRow() + r);
                positions.add(o.from() + r);
                slots.add(cx.rows + r);
            }
            cx.rows += o.count();
        }
        float[] cs = new float[half], sn = new float[half];
        for (int at = 0; at < rows.size(); at += maxRows) {
            int n = Math.min(maxRows, rows.size() - at);
            // staging: feat (n x in bf16, host taps only), cos and sin (n x half fp32), the K and V row addresses (L x n
            // each), the rows' indices in the target's tap buffer (n ints, device taps)
            long featBytes = 2L * n * in, ropeBytes = 4L * n * half, addrBytes = 8L * L * n;
            MemorySegment st = injectStaging;
            short[] bits = new short[in];
            for (int r = 0; r < n; r++) {
                if (onDevice) {
                    st.set(ValueLayout.JAVA_INT_UNALIGNED, featBytes + 2 * ropeBytes + 2 * addrBytes + 4L * r, stepRows.get(at + r));
                } else {
                    float[] row = rows.get(at + r);
                    for (int i = 0; i < in; i++) {
                        bits[i] = Bf16.fromFloat(row[i]);
                    }
                    MemorySegment.copy(bits, 0, st, BF16, 2L * r * in, in); // one bulk copy a row
                }
                rotary.fill(positions.get(at + r), 1, cs, sn);
                MemorySegment.copy(cs, 0, st, ValueLayout.JAVA_FLOAT, featBytes + 4L * r * half, half);
                MemorySegment.copy(sn, 0, st, ValueLayout.JAVA_FLOAT, featBytes + ropeBytes + 4L * r * half, half);
                Context cx = owners.get(at + r);
                long off = (long) slots.get(at + r) * kw * 2;
                for (int l = 0; l < L; l++) {
                    long a = featBytes + 2 * ropeBytes + 8L * (l * n + r);
                    st.set(ValueLayout.JAVA_LONG_UNALIGNED, a, cx.k[l] + off);
                    st.set(ValueLayout.JAVA_LONG_UNALIGNED, a + addrBytes, cx.v[l] + off);
                }
            }
            cuda.copyToDeviceAsync(irope, st.asSlice(featBytes), 2 * ropeBytes + 2 * addrBytes + 4L * n);
            if (!onDevice) {
                cuda.copyToDeviceAsync(feat, st, featBytes);
            }
            injection(n, ropeBytes, addrBytes, dt);
            if (at + n < rows.size()) {
                cuda.sync(); // the staging buffer is written again for the next piece
            }
        }
    }

    /**
     * The injection of n staged rows (taps gathered from the target's buffer {@code dt}, or copied from the host when it is
     * null): fc, hidden_norm, then each layer's k and v projections, k_norm, RoPE and scatter_kv. Its launches depend on n
     * and the tap buffer alone (the staged inputs lie at offsets set by n), so one CUDA graph per (n, tap buffer and its
     * rows) replays them: ~5 launches a layer, each a call through the driver, cost one.
     */
    private void injection(int n, long ropeBytes, long addrBytes, CudaForwardPass.DeviceTaps dt) {
        replay(dt == null ? List.of(-1, n) : List.of(-2, n, dt.rows(), (int) (dt.buffer() >>> 32), (int) dt.buffer()),
                () -> launchInjection(n, ropeBytes, addrBytes, dt));
    }

    /**
     * Runs {@code launches} as the CUDA graph captured for {@code key} (captured at its first run, with programmatic dependent
     * launch as the target's steps: every kernel they launch waits first, common.cuh), or kernel by kernel where graphs are off
     * or MAX_GRAPHS are held.
     */
    private void replay(List<Integer> key, Runnable launches) {
        if (target.cudaGraphs()) {
            graphs.replay(key, launches);
        } else {
            launches.run();
        }
    }

    /** The injection's launches; ropeBytes and addrBytes: the staged inputs' layout as injectAll wrote it (set by n). */
    private void launchInjection(int n, long ropeBytes, long addrBytes, CudaForwardPass.DeviceTaps dt) {
        int h = c.hidden(), kw = kvWidth(), in = taps.length * h;
        long sin = irope + ropeBytes, kAddr = irope + 2 * ropeBytes, vAddr = kAddr + addrBytes, stepRowIdx = vAddr + addrBytes;
        if (dt != null) {
            k.gatherTaps(dt.buffer(), dt.rows(), h, taps.length, stepRowIdx, feat, n);
        }
        linear.apply(feat, n, in, w("fc.weight"), h, ctx);
        k.rmsNorm(ctx, w("hidden_norm.weight"), ctx, n, h, c.rmsNormEps());
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".self_attn.";
            linear.apply(ctx, n, h, w(p + "k_proj.weight"), kw, ck);
            linear.apply(ctx, n, h, w(p + "v_proj.weight"), kw, cv);
            k.rmsNorm(ck, w(p + "k_norm.weight"), ck, n * c.kvHeads(), c.headDim(), c.rmsNormEps());
            k.rope(ck, kw, irope, sin, pos, n, c.kvHeads(), c.headDim());
            k.scatterKv(ck, cv, kw, kAddr + 8L * l * n, vAddr + 8L * l * n, n);
        }
    }

    @Override
    public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
        return draftAll(List.of(new Call(id, anchor, drafts, sampling))).getFirst();
    }

    /** Up to DRAFT_SEQUENCES sequences' blocks a forward (more in several). */
    @Override
    public List<Proposal> draftAll(List<Call> calls) {
        for (Call call : calls) {
            if (call.drafts() < 1 || call.drafts() > c.blockSize() - 1) {
                throw new IllegalArgumentException("a block drafts 1.." + (c.blockSize() - 1) + " tokens, asked for " + call.drafts());
            }
        }
        cuda.makeCurrent();
        List<Proposal> out = new ArrayList<>(calls.size());
        for (int at = 0; at < calls.size(); at += DRAFT_SEQUENCES) {
            out.addAll(forward(calls.subList(at, Math.min(calls.size(), at + DRAFT_SEQUENCES))));
        }
        return out;
    }

    /**
     * One forward over the blocks of calls (at most DRAFT_SEQUENCES): the block of each, [anchor, mask x drafts] at the
     * positions after its context, its rows after the previous block's; every input (ids, each row's index in its block
     * and rotary rows, the drafted rows' indices, per sequence its context and per layer its context K / V addresses)
     * staged in one copy; the drafted rows gathered after the final norm for the output head. Drafts are picked on the
     * device where picksOnDevice says (DFlash's argmax over all rows; DFlash2's walk a sequence, after one top-k pass
     * over all rows), one copy bringing every id (and a sampled walk's q) back; the rest read their rows' logits on
     * the host.
     */
    private List<Proposal> forward(List<Call> calls) {
        int S = calls.size(), half = c.headDim() / 2;
        int[] row0 = new int[S], drafted0 = new int[S];
        int n = 0, d = 0;
        for (int i = 0; i < S; i++) {
            row0[i] = n;
            drafted0[i] = d;
            n += calls.get(i).drafts() + 1;
            d += calls.get(i).drafts();
        }
        MemorySegment st = draftStaging;
        float[] cs = new float[half], sn = new float[half];
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            Context cx = contexts.get(call.id());
            int position = cx == null ? 0 : cx.start + cx.rows, rows = call.drafts() + 1;
            for (int r = 0; r < rows; r++) {
                int row = row0[i] + r;
                st.setAtIndex(ValueLayout.JAVA_INT, dsIds + row, r == 0 ? call.anchor() : c.maskTokenId());
                st.setAtIndex(ValueLayout.JAVA_INT, dsInBlock + row, r);
                st.setAtIndex(ValueLayout.JAVA_INT, dsRowSeq + row, i);
                if (r > 0) {
                    st.setAtIndex(ValueLayout.JAVA_INT, dsGather + drafted0[i] + r - 1, row);
                }
                rotary.fill(position + r, 1, cs, sn);
                MemorySegment.copy(cs, 0, st, ValueLayout.JAVA_FLOAT, dsCos + 4L * row * half, half);
                MemorySegment.copy(sn, 0, st, ValueLayout.JAVA_FLOAT, dsSin + 4L * row * half, half);
            }
            if (sampled(call)) { // the draws a host walk would take from the sequence's generator, in the same order
                for (int r = 0; r < call.drafts(); r++) {
                    st.setAtIndex(ValueLayout.JAVA_DOUBLE, dsU / 8 + drafted0[i] + r, call.sampling().rng().nextDouble());
                }
            }
            int[] seq = {cx == null ? 0 : cx.rows, cx == null ? 0 : cx.start, position, row0[i], rows};
            for (int f = 0; f < 5; f++) {
                st.setAtIndex(ValueLayout.JAVA_INT, dsSeqs + 5L * i + f, seq[f]);
            }
            for (int l = 0; l < c.layers(); l++) {
                st.set(ValueLayout.JAVA_LONG_UNALIGNED, dsCtx + 16L * (l * DRAFT_SEQUENCES + i), cx == null ? 0 : cx.k[l]);
                st.set(ValueLayout.JAVA_LONG_UNALIGNED, dsCtx + 16L * (l * DRAFT_SEQUENCES + i) + 8, cx == null ? 0 : cx.v[l]);
            }
        }
        cuda.copyToDeviceAsync(dmeta, st, st.byteSize());
        boolean onDevice = false, sampledOnDevice = false; // picks made on the device, and sampled walks among them
        int topK = c.selectorTopK();
        blockForward(n, d);
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            boolean sampled = sampled(call);
            onDevice |= picksOnDevice(call);
            if (deviceWalk) {
                sampledOnDevice |= sampled;
                long off = drafted0[i];
                k.selectorWalk(logits + 2L * off * vocab, call.drafts(), vocab, proj + 2L * off * c.selectorRank(), c.selectorRank(), topK,
                        w("candidate_selector.predecessor_codebook"), w("candidate_selector.successor_codebook"), call.anchor(), argmaxOut + 4L * off,
                        sampled ? dmeta + dsU + 8L * off : 0L, sampled ? call.sampling().params().temperature() : 0.0, walkQ + 4L * off * topK,
                        walkCand + 4L * off * topK, walkParts, d, drafted0[i]);
            }
        }
        MemorySegment got = null;
        if (onDevice) {
            got = idsHost.asSlice(0, sampledOnDevice ? walkQ - walkOut + 4L * d * topK : 4L * d);
            cuda.copyToHost(got, walkOut);
        }
        List<Proposal> out = new ArrayList<>(S);
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            boolean sampled = sampled(call);
            if (picksOnDevice(call)) {
                int[] tokens = new int[call.drafts()];
                MemorySegment.copy(got, ValueLayout.JAVA_INT, 4L * drafted0[i], tokens, 0, tokens.length);
                if (!sampled) {
                    out.add(Proposal.of(tokens));
                    continue;
                }
                float[][] q = new float[call.drafts()][vocab]; // the walk's q: its candidates' probabilities, zero elsewhere
                for (int r = 0; r < q.length; r++) {
                    for (int j = 0; j < Math.min(topK, vocab); j++) {
                        long at = (long) (drafted0[i] + r) * topK + j;
                        q[r][got.getAtIndex(ValueLayout.JAVA_INT, (walkCand - walkOut) / 4 + at)] = got.getAtIndex(ValueLayout.JAVA_FLOAT, (walkQ - walkOut) / 4 + at);
                    }
                }
                out.add(new Proposal(tokens, q));
            } else {
                out.add(onHost(call, drafted0[i]));
            }
        }
        Call last = calls.getLast();
        lastFirst = drafted0[S - 1];
        lastDrafts = last.drafts();
        lastLogits = null;
        return out;
    }

    /**
     * The block forward after its inputs are staged: embeddings, the layers, the final norm, the drafted rows' logits and their
     * argmax (DFlash) or top-k candidates (DFlash2's device walk). Its launches depend on the rows (n) and drafted rows (d) alone,
     * every other input being data at fixed addresses, so one CUDA graph per (n, d) replays it (as the target replays its decode
     * steps): ~20 launches a layer cost one.
     */
    private void blockForward(int n, int d) {
        replay(List.of(n, d), () -> launchBlockForward(n, d));
    }

    private void launchBlockForward(int n, int d) {
        int h = c.hidden(), kw = kvWidth(), qd = c.heads() * c.headDim(), in = c.intermediate();
        long ids = dmeta + 4L * dsIds, inBlock = dmeta + 4L * dsInBlock, gather = dmeta + 4L * dsGather, rowSeq = dmeta + 4L * dsRowSeq;
        long seqs = dmeta + 4L * dsSeqs, cosT = dmeta + dsCos, sinT = dmeta + dsSin;
        k.embed(ids, embedding, x, n, h);
        if (c.inputEmbeddingScale() != 1f) {
            k.shapeLogits(x, (long) n * h, c.inputEmbeddingScale(), 0f);
        }
        boolean two = c.kind() == DraftHeadConfig.Kind.DFLASH2;
        int groups = two ? h / c.convGroup() : 1, dynW = two ? 2 * c.convKernel() * groups : 1;
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".";
            k.rmsNorm(x, w(p + "input_layernorm.weight"), xn, n, h, c.rmsNormEps());
            long attIn = xn;
            if (two) {
                linear.apply(xn, n, h, w(p + "attention_conv.kernel_projection.weight"), dynW, dyn);
                k.dynConv(xn, dyn, dynW, 0, w(p + "attention_conv.base_kernel"), conv, inBlock, n, h, c.convGroup(), c.convKernel());
                attIn = conv;
            }
            String a = p + "self_attn.";
            linear.apply(attIn, n, h, w(a + "q_proj.weight"), qd, q);
            linear.apply(attIn, n, h, w(a + "k_proj.weight"), kw, kb);
            linear.apply(attIn, n, h, w(a + "v_proj.weight"), kw, vb);
            k.rmsNorm(q, w(a + "q_norm.weight"), q, n * c.heads(), c.headDim(), c.rmsNormEps());
            k.rmsNorm(kb, w(a + "k_norm.weight"), kb, n * c.kvHeads(), c.headDim(), c.rmsNormEps());
            k.rope(q, qd, cosT, sinT, pos, n, c.heads(), c.headDim());
            k.rope(kb, kw, cosT, sinT, pos, n, c.kvHeads(), c.headDim());
            k.draftAttention(q, dmeta + dsCtx + 16L * l * DRAFT_SEQUENCES, seqs, rowSeq, kb, vb, att, n, c.heads(), c.kvHeads(), c.headDim(),
                    c.sliding()[l] ? c.slidingWindow() : 0);
            linear.apply(att, n, qd, w(a + "o_proj.weight"), h, o);
            if (two) {
                k.dynConv(o, dyn, dynW, c.convKernel() * groups, w(p + "attention_conv.base_kernel") + (long) c.convKernel() * h * 2, conv, inBlock, n, h,
                        c.convGroup(), c.convKernel());
                k.residualAdd(x, conv, (long) n * h);
            } else {
                k.residualAdd(x, o, (long) n * h);
            }
            k.rmsNorm(x, w(p + "post_attention_layernorm.weight"), xn, n, h, c.rmsNormEps());
            long mlpIn = xn;
            if (two) {
                linear.apply(xn, n, h, w(p + "mlp_conv.kernel_projection.weight"), dynW, dyn);
                k.dynConv(xn, dyn, dynW, 0, w(p + "mlp_conv.base_kernel"), conv, inBlock, n, h, c.convGroup(), c.convKernel());
                mlpIn = conv;
            }
            linear.apply(mlpIn, n, h, w(p + "mlp.gate_up.weight"), 2 * in, gateUp);
            k.swiglu(gateUp, act, n, in);
            linear.apply(act, n, in, w(p + "mlp.down_proj.weight"), h, mlp);
            if (two) {
                k.dynConv(mlp, dyn, dynW, c.convKernel() * groups, w(p + "mlp_conv.base_kernel") + (long) c.convKernel() * h * 2, conv, inBlock, n, h,
                        c.convGroup(), c.convKernel());
                k.residualAdd(x, conv, (long) n * h);
            } else {
                k.residualAdd(x, mlp, (long) n * h);
            }
        }
        k.rmsNorm(x, w("norm.weight"), xn, n, h, c.rmsNormEps());
        k.embed(gather, xn, picked, d, h); // the drafted rows (each block's rows 1..)
        linear.apply(picked, d, lmHead, logits);
        if (c.outputMultiplier() != 1f || c.softcap() > 0) {
            k.shapeLogits(logits, (long) d * vocab, c.outputMultiplier(), c.softcap());
        }
        if (two) {
            linear.apply(picked, d, h, w("candidate_selector.hidden_projection.weight"), c.selectorRank(), proj);
        } else {
            k.argmax(logits, d, vocab, argmaxOut);
        }
        if (deviceWalk) {
            k.rowTopK(logits, d, vocab, c.selectorTopK(), walkParts); // every drafted row's candidates at once; the walks then go row by row
        }
    }

    private static boolean sampled(Call call) {
        return call.sampling() != null && call.sampling().params().temperature() > 0;
    }

    /** Whether the call's drafts are picked on the device: every DFlash2 walk the kernel takes, DFlash's greedy argmax. */
    private boolean picksOnDevice(Call call) {
        return c.kind() == DraftHeadConfig.Kind.DFLASH2 ? deviceWalk : !sampled(call);
    }

    /** A draft picked on the host from its rows' logits (from row first of the drafted rows): a sampled one, or a walk too wide for the kernel. */
    private Proposal onHost(Call call, int first) {
        int drafts = call.drafts();
        Sampling sampling = sampled(call) ? call.sampling() : null;
        float[][] z = hostLogits(first, drafts);
        if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
            int rank = c.selectorRank();
            MemorySegment ph = projHost.asSlice(0, 2L * drafts * rank);
            cuda.copyToHost(ph, proj + 2L * first * rank);
            float[] pr = new float[drafts * rank];
            for (int i = 0; i < pr.length; i++) {
                pr[i] = Bf16.toFloat(ph.getAtIndex(BF16, i));
            }
            return CandidateSelector.walk(z, pr, rank, c.selectorTopK(), host.get("candidate_selector.predecessor_codebook").data(),
                    host.get("candidate_selector.successor_codebook").data(), call.anchor(), sampling);
        }
        int[] tokens = new int[drafts];
        float[][] qs = new float[drafts][];
        for (int r = 0; r < drafts; r++) {
            qs[r] = Sampler.probabilities(z[r], sampling.params());
            tokens[r] = Sampler.drawFrom(qs[r], sampling.rng());
        }
        return new Proposal(tokens, qs);
    }

    /** Drafted rows [first, first + drafts) of the last forward's logits on the host (fp32 of the bf16 values). */
    private float[][] hostLogits(int first, int drafts) {
        MemorySegment m = logitsHost.asSlice(0, 2L * drafts * vocab);
        cuda.copyToHost(m, logits + 2L * first * vocab);
        float[][] out = new float[drafts][vocab];
        for (int r = 0; r < drafts; r++) {
            for (int i = 0; i < vocab; i++) {
                out[r][i] = Bf16.toFloat(m.getAtIndex(BF16, (long) r * vocab + i));
            }
        }
        return out;
    }

    /** The draft logits of the last forward's last sequence (read back to the host for a greedy draft too: for tests). */
    @Override
    public float[][] lastLogits() {
        if (lastLogits == null && lastDrafts > 0) {
            cuda.makeCurrent();
            lastLogits = hostLogits(lastFirst, lastDrafts);
        }
        return lastLogits;
    }

    @Override
    public String describe() {
        return c.describe() + " on CUDA";
    }

    @Override
    public void close() {
        cuda.makeCurrent();
        cuda.sync();
        graphs.close();
        contexts.clear();
        allocations.forEach(linear::forget); // the GEMMs' cached tensor maps of these buffers go with them
        allocations.forEach(cuda::free);
        allocations.clear();
        cuda.freeHost(injectStaging);
        cuda.freeHost(draftStaging);
        arena.close();
        closeResources();
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.cpu.CpuDraftHead;
import dev.spindle.backend.cpu.RotaryTable;
import dev.spindle.engine.spec.DraftHead;
import dev.spindle.engine.spec.Observation;
import dev.spindle.engine.spec.Proposal;
import dev.spindle.model.Bf16;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.Tensor;

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
 * context, DFlash2's dynamic convolutions, the logits' multiplier and soft-cap). Greedy drafts are picked on
 * the device, only ids coming back: DFlash's by argmax, DFlash2's by draft_head.cu's selector_walk (the bits of
 * CpuDraftHead's walk; top-k up to 32, rank up to 1024, else the host walk). Sampled drafts read the rows'
 * logits on the host (the sampled walk, the sampler's distribution). Per sequence its context K/V
 * live in device arrays that grow by doubling. Same rounding points as the CPU head except the attention's
 * (an online softmax), so its parity is gated as the CPU head's: KL to the fp32 reference.
 */
public final class CudaDraftHead implements DraftHead {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final DraftHeadConfig c;
    private final CudaDriver cuda;
    private final CudaKernels k;
    private final Linear linear;
    private final long embedding, lmHead;
    private final int vocab;
    private final int[] taps;
    private final Map<String, Long> dw = new HashMap<>();
    private final Map<String, Tensor> host;
    private final List<Long> allocations = new ArrayList<>();
    private final RotaryTable rotary;
    private final dev.spindle.engine.spec.DraftContexts<Context> contexts = new dev.spindle.engine.spec.DraftContexts<>(Context::free);
    private final int maxRows; // context rows injected in one call at most (more are injected in pieces)
    // block buffers (block rows at most)
    private final long ids, pos, cosT, sinT, x, xn, conv, q, kb, vb, att, o, gateUp, act, mlp, dyn, logits, argmaxOut, proj;
    // injection buffers (maxRows rows)
    private final long feat, ctx, ck, cv, ipos, irope;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment logitsHost, idsHost, projHost, injectStaging;
    private float[][] lastLogits;
    private int lastDrafts;

    private final class Context extends dev.spindle.engine.spec.DraftContexts.Span {
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
        this.c = config;
        this.cuda = target.driver();
        cuda.makeCurrent();
        this.k = target.kernels();
        this.linear = target.linear();
        this.embedding = target.weights().embedding();
        this.lmHead = target.weights().lmHead();
        this.vocab = target.config().vocabSize();
        this.taps = tapLayers.clone();
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
        ids = alloc(4L * b);
        pos = alloc(4L * b);
        cosT = alloc(4L * b * c.headDim() / 2);
        sinT = alloc(4L * b * c.headDim() / 2);
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
        argmaxOut = alloc(4L * b);
        proj = alloc(2L * b * Math.max(1, c.selectorRank()));
        feat = alloc(2L * maxRows * taps.length * h);
        ctx = alloc(2L * maxRows * h);
        ck = alloc(2L * maxRows * kw);
        cv = alloc(2L * maxRows * kw);
        ipos = alloc(4L * maxRows);
        // an injection's cos and sin rows, then its K and V row addresses per layer: one copy
        irope = alloc(4L * maxRows * c.headDim() + 16L * maxRows * c.layers());
        logitsHost = arena.allocate(2L * b * vocab, 64);
        idsHost = arena.allocate(4L * b, 64);
        projHost = arena.allocate(2L * b * Math.max(1, c.selectorRank()), 64);
        injectStaging = cuda.allocHost(2L * maxRows * taps.length * h + 4L * maxRows * c.headDim() + 16L * maxRows * c.layers());
        int[] identity = new int[maxRows]; // injected rows index their own rotary rows
        for (int r = 0; r < maxRows; r++) {
            identity[r] = r;
        }
        uploadInts(ipos, identity);
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
        linear.prepare(h, lmHead, vocab);
        for (long[] in2 : new long[][]{{feat, maxRows, taps.length * h}, {ctx, maxRows, h}, {xn, b, h}, {conv, b, h}, {att, b, qd}, {act, b, in}}) {
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
    public int blockSize() {
        return c.blockSize();
    }

    @Override
    public int[] tapLayers() {
        return taps.clone();
    }

    @Override
    public int contextEnd(long id) {
        return contexts.end(id);
    }

    @Override
    public int contextStart(long id) {
        return contexts.start(id);
    }

    @Override
    public void truncate(long id, int position) {
        contexts.truncate(id, position);
    }

    @Override
    public void release(long id) {
        cuda.makeCurrent();
        contexts.release(id);
    }

    private void uploadInts(long dst, int[] values) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(4L * values.length, 16);
            m.copyFrom(MemorySegment.ofArray(values));
            cuda.copyToDevice(dst, m);
        }
    }

    private void uploadRope(long cosDst, long sinDst, int start, int n) {
        int half = c.headDim() / 2;
        float[] cs = new float[n * half], sn = new float[n * half];
        rotary.fill(start, n, cs, sn);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment mc = a.allocate(4L * cs.length, 16), ms = a.allocate(4L * sn.length, 16);
            mc.copyFrom(MemorySegment.ofArray(cs));
            ms.copyFrom(MemorySegment.ofArray(sn));
            cuda.copyToDevice(cosDst, mc);
            cuda.copyToDevice(sinDst, ms);
        }
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
        List<Integer> positions = new ArrayList<>(), slots = new ArrayList<>();
        java.util.Set<Long> seen = new java.util.HashSet<>();
        for (Observation o : batch) {
            if (o.count() == 0) {
                continue;
            }
            if (!seen.add(o.id())) {
                throw new IllegalArgumentException("sequence " + o.id() + " appears twice in one injection");
            }
            Context cx = contexts.extendAt(o.id(), o.from(), Context::new);
            cx.ensure(o.count()); // before any row's address is taken: growing moves the arrays
            for (int r = 0; r < o.count(); r++) {
                owners.add(cx);
                rows.add(o.taps()[r]);
                positions.add(o.from() + r);
                slots.add(cx.rows + r);
            }
            cx.rows += o.count();
        }
        float[] cs = new float[half], sn = new float[half];
        for (int at = 0; at < rows.size(); at += maxRows) {
            int n = Math.min(maxRows, rows.size() - at);
            // staging: feat (n x in bf16), cos and sin (n x half fp32), the K and V row addresses (L x n each)
            long featBytes = 2L * n * in, ropeBytes = 4L * n * half, addrBytes = 8L * L * n;
            MemorySegment st = injectStaging;
            for (int r = 0; r < n; r++) {
                float[] row = rows.get(at + r);
                for (int i = 0; i < in; i++) {
                    st.setAtIndex(BF16, (long) r * in + i, Bf16.fromFloat(row[i]));
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
            cuda.copyToDeviceAsync(feat, st, featBytes);
            cuda.copyToDeviceAsync(irope, st.asSlice(featBytes), 2 * ropeBytes + 2 * addrBytes);
            long sin = irope + ropeBytes, kAddr = irope + 2 * ropeBytes, vAddr = kAddr + addrBytes;
            linear.apply(feat, n, in, w("fc.weight"), h, ctx);
            k.rmsNorm(ctx, w("hidden_norm.weight"), ctx, n, h, c.rmsNormEps());
            for (int l = 0; l < L; l++) {
                String p = "layers." + l + ".self_attn.";
                linear.apply(ctx, n, h, w(p + "k_proj.weight"), kw, ck);
                linear.apply(ctx, n, h, w(p + "v_proj.weight"), kw, cv);
                k.rmsNorm(ck, w(p + "k_norm.weight"), ck, n * c.kvHeads(), c.headDim(), c.rmsNormEps());
                k.rope(ck, kw, irope, sin, ipos, n, c.kvHeads(), c.headDim());
                k.scatterKv(ck, cv, kw, kAddr + 8L * l * n, vAddr + 8L * l * n, n);
            }
            if (at + n < rows.size()) {
                cuda.sync(); // the staging buffer is written again for the next piece
            }
        }
    }

    @Override
    public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
        if (drafts < 1 || drafts > c.blockSize() - 1) {
            throw new IllegalArgumentException("a block drafts 1.." + (c.blockSize() - 1) + " tokens, asked for " + drafts);
        }
        cuda.makeCurrent();
        Context cx = contexts.get(id);
        int position = cx == null ? 0 : cx.start + cx.rows;
        int ctxRows = cx == null ? 0 : cx.rows, ctxStart = cx == null ? 0 : cx.start;
        int n = drafts + 1, h = c.hidden(), kw = kvWidth(), qd = c.heads() * c.headDim(), in = c.intermediate();
        int[] blockIds = new int[n];
        java.util.Arrays.fill(blockIds, c.maskTokenId());
        blockIds[0] = anchor;
        uploadInts(ids, blockIds);
        int[] positions = new int[n];
        for (int r = 0; r < n; r++) {
            positions[r] = r;
        }
        uploadInts(pos, positions);
        uploadRope(cosT, sinT, position, n);
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
                k.dynConv(xn, dyn, dynW, 0, w(p + "attention_conv.base_kernel"), conv, n, h, c.convGroup(), c.convKernel());
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
            k.draftAttention(q, cx == null ? kb : cx.k[l], cx == null ? vb : cx.v[l], kb, vb, att, n, ctxRows, ctxStart, position, c.heads(), c.kvHeads(),
                    c.headDim(), c.sliding()[l] ? c.slidingWindow() : 0);
            linear.apply(att, n, qd, w(a + "o_proj.weight"), h, o);
            if (two) {
                k.dynConv(o, dyn, dynW, c.convKernel() * groups, w(p + "attention_conv.base_kernel") + (long) c.convKernel() * h * 2, conv, n, h,
                        c.convGroup(), c.convKernel());
                k.residualAdd(x, conv, (long) n * h);
            } else {
                k.residualAdd(x, o, (long) n * h);
            }
            k.rmsNorm(x, w(p + "post_attention_layernorm.weight"), xn, n, h, c.rmsNormEps());
            long mlpIn = xn;
            if (two) {
                linear.apply(xn, n, h, w(p + "mlp_conv.kernel_projection.weight"), dynW, dyn);
                k.dynConv(xn, dyn, dynW, 0, w(p + "mlp_conv.base_kernel"), conv, n, h, c.convGroup(), c.convKernel());
                mlpIn = conv;
            }
            linear.apply(mlpIn, n, h, w(p + "mlp.gate_up.weight"), 2 * in, gateUp);
            k.swiglu(gateUp, act, n, in);
            linear.apply(act, n, in, w(p + "mlp.down_proj.weight"), h, mlp);
            if (two) {
                k.dynConv(mlp, dyn, dynW, c.convKernel() * groups, w(p + "mlp_conv.base_kernel") + (long) c.convKernel() * h * 2, conv, n, h,
                        c.convGroup(), c.convKernel());
                k.residualAdd(x, conv, (long) n * h);
            } else {
                k.residualAdd(x, mlp, (long) n * h);
            }
        }
        k.rmsNorm(x, w("norm.weight"), xn, n, h, c.rmsNormEps());
        long rows = xn + 2L * h; // rows 1..n-1
        linear.apply(rows, drafts, h, lmHead, vocab, logits);
        if (c.outputMultiplier() != 1f || c.softcap() > 0) {
            k.shapeLogits(logits, (long) drafts * vocab, c.outputMultiplier(), c.softcap());
        }
        boolean sampled = sampling != null && sampling.params().temperature() > 0;
        lastDrafts = drafts;
        if (!two && !sampled) {
            k.argmax(logits, drafts, vocab, argmaxOut);
            return idsPicked(drafts);
        }
        if (two && !sampled && c.selectorTopK() <= CudaKernels.SELECTOR_WALK_MAX_K && c.selectorRank() <= CudaKernels.SELECTOR_WALK_MAX_RANK) {
            linear.apply(rows, drafts, h, w("candidate_selector.hidden_projection.weight"), c.selectorRank(), proj);
            k.selectorWalk(logits, drafts, vocab, proj, c.selectorRank(), c.selectorTopK(), w("candidate_selector.predecessor_codebook"),
                    w("candidate_selector.successor_codebook"), anchor, argmaxOut);
            return idsPicked(drafts);
        }
        float[][] z = hostLogits(drafts);
        lastLogits = z;
        if (two) {
            int rank = c.selectorRank();
            linear.apply(rows, drafts, h, w("candidate_selector.hidden_projection.weight"), rank, proj);
            MemorySegment ph = projHost.asSlice(0, 2L * drafts * rank);
            cuda.copyToHost(ph, proj);
            float[] pr = new float[drafts * rank];
            for (int i = 0; i < pr.length; i++) {
                pr[i] = Bf16.toFloat(ph.getAtIndex(BF16, i));
            }
            return CpuDraftHead.walk(z, pr, rank, c.selectorTopK(), host.get("candidate_selector.predecessor_codebook").data(),
                    host.get("candidate_selector.successor_codebook").data(), anchor, sampled ? sampling : null);
        }
        int[] tokens = new int[drafts];
        float[][] qs = new float[drafts][];
        for (int r = 0; r < drafts; r++) {
            qs[r] = dev.spindle.engine.sample.Sampler.probabilities(z[r], sampling.params());
            tokens[r] = dev.spindle.engine.sample.Sampler.drawFrom(qs[r], sampling.rng());
        }
        return new Proposal(tokens, qs);
    }

    /** The drafts picked on the device (argmaxOut): only the ids come back, the logits stay there until lastLogits asks. */
    private Proposal idsPicked(int drafts) {
        MemorySegment out = idsHost.asSlice(0, 4L * drafts);
        cuda.copyToHost(out, argmaxOut);
        lastLogits = null;
        return Proposal.of(out.toArray(ValueLayout.JAVA_INT));
    }

    /** The rows' logits on the host (fp32 of the bf16 values). */
    private float[][] hostLogits(int drafts) {
        MemorySegment m = logitsHost.asSlice(0, 2L * drafts * vocab);
        cuda.copyToHost(m, logits);
        float[][] out = new float[drafts][vocab];
        for (int r = 0; r < drafts; r++) {
            for (int i = 0; i < vocab; i++) {
                out[r][i] = Bf16.toFloat(m.getAtIndex(BF16, (long) r * vocab + i));
            }
        }
        return out;
    }

    /** The draft logits of the last draft (read back to the host for a greedy DFlash draft too: for tests). */
    @Override
    public float[][] lastLogits() {
        if (lastLogits == null && lastDrafts > 0) {
            cuda.makeCurrent();
            lastLogits = hostLogits(lastDrafts);
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
        contexts.clear();
        allocations.forEach(linear::forget); // the GEMMs' cached tensor maps of these buffers go with them
        allocations.forEach(cuda::free);
        allocations.clear();
        cuda.freeHost(injectStaging);
        arena.close();
    }
}

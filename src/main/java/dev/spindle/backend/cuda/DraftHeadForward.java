package dev.spindle.backend.cuda;

import dev.spindle.model.DraftHeadConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/**
 * A CUDA draft head's buffers and its two launch sequences: the block forward (embeddings, the layers, the final norm,
 * the drafted rows' logits and their argmax or top-k candidates) and the injection (fc, hidden_norm, each layer's
 * context K and V written after its sequence's rows). The launches read every per-call input from the staged
 * buffers below at fixed addresses, so each depends on its row counts alone and is captured once per count.
 * All activations are bf16, row-major.
 */
final class DraftHeadForward implements AutoCloseable {
    /** Sequences drafted in one forward at most (more go in several). */
    static final int DRAFT_SEQUENCES = 16;
    /** Context rows injected in one call at most (more are injected in pieces). */
    static final int MAX_INJECT_ROWS = 512;

    private final CudaDriver cuda;
    private final CudaKernels k;
    private final Linear linear;
    private final DraftHeadConfig c;
    private final DraftHeadWeights w;
    private final long embedding;
    private final DeviceMatrix lmHead;
    private final int vocab, taps;
    private final List<Long> allocations = new ArrayList<>();
    private final Arena arena = Arena.ofShared();
    /** DFlash2's walk on the device (its top-k and rank within the kernel's). */
    final boolean deviceWalk;

    // a forward's buffers, rows = DRAFT_SEQUENCES blocks at most; h hidden, qd heads x head_dim, kw kv heads x head_dim
    /** [max(rows, MAX_INJECT_ROWS)] ints 0, 1, 2, ...: a forward's or an injection's rows index their own rotary rows. */
    private final long pos;
    private final long x, xn, conv, o, mlp, picked; // [rows, h]
    private final long q, att;                       // [rows, qd]
    private final long kb, vb;                       // [rows, kw]
    private final long gateUp;                       // [rows, 2 * intermediate]
    private final long act;                          // [rows, intermediate]
    private final long dyn;                          // [rows, 2 * conv kernel * groups] DFlash2's dynamic kernels
    /** [drafted rows, vocab]: the drafted rows' logits. */
    final long logits;
    /** [drafted rows, selector rank]: DFlash2's hidden projection for the walk. */
    final long proj;

    /**
     * A forward's staged inputs, the same layout on the host ({@link #draftStaging}) and the device ({@link #dmeta}):
     * ints ids, inBlock, rowSeq, gather (a forward's rows each), seqs (5 a sequence: context rows, context start,
     * position, first row, rows), then bytes: per layer and sequence its context's K and V addresses (dsCtx), the rows'
     * cos and sin (fp32, head_dim / 2 each), the sampled walk's uniforms (doubles, a drafted row each).
     */
    final long dmeta;
    final MemorySegment draftStaging;
    final int dsIds = 0, dsInBlock, dsRowSeq, dsGather, dsSeqs; // in ints
    final long dsCtx, dsCos, dsSin, dsU;                       // in bytes

    /** The walk's results: ids (a forward's rows), then for a sampled walk each row's candidates (ints) and their q (floats). */
    final long walkOut, walkCand, walkQ;
    /** The first pass of the rows' top-k (DFlash2's device walk). */
    final long walkParts;
    /** DFlash's argmax ids: the walk's output. */
    final long argmaxOut;

    // an injection's buffers (MAX_INJECT_ROWS rows)
    /** [rows, taps x h]: the tapped target rows. */
    final long feat;
    private final long ctx;    // [rows, h]
    private final long ck, cv; // [rows, kw]
    /** An injection's cos and sin rows, then its K and V row addresses per layer, then its rows in the target's tap buffer: one copy. */
    final long irope;
    /** The host side of an injection's copy: feat (host taps only), then irope's layout. */
    final MemorySegment injectStaging;

    /** Host copies: one sequence's drafted rows' logits, the walk's results, one sequence's projections. */
    final MemorySegment logitsHost, idsHost, projHost;

    DraftHeadForward(CudaForwardPass target, DraftHeadConfig config, DraftHeadWeights weights, int taps) {
        this.cuda = target.driver();
        this.k = target.kernels();
        this.linear = target.linear();
        this.c = config;
        this.w = weights;
        this.embedding = target.weights().embedding();
        this.lmHead = target.weights().lmHead();
        this.vocab = target.config().vocabSize();
        this.taps = taps;
        int h = c.hidden(), kw = kvWidth(), qd = c.heads() * c.headDim(), in = c.intermediate(), block = c.blockSize();
        int maxRows = MAX_INJECT_ROWS;
        int b = block * DRAFT_SEQUENCES; // rows of one forward at most
        dsInBlock = b;
        dsRowSeq = 2 * b;
        dsGather = 3 * b;
        dsSeqs = 4 * b;
        dsCtx = (4L * (dsSeqs + 5L * DRAFT_SEQUENCES) + 7) & ~7L;
        dsCos = dsCtx + 16L * c.layers() * DRAFT_SEQUENCES;
        dsSin = dsCos + 2L * b * c.headDim();
        dsU = dsSin + 2L * b * c.headDim();
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
        dyn = alloc(2L * b * dynWidth());
        logits = alloc(2L * b * vocab);
        int topK = Math.max(1, c.selectorTopK());
        walkOut = alloc(4L * b + 8L * b * topK);
        walkCand = walkOut + 4L * b;
        walkQ = walkCand + 4L * b * topK;
        deviceWalk = c.kind() == DraftHeadConfig.Kind.DFLASH2 && c.selectorTopK() <= DraftHeadKernels.SELECTOR_WALK_MAX_K
                && c.selectorRank() <= DraftHeadKernels.SELECTOR_WALK_MAX_RANK;
        walkParts = deviceWalk ? alloc(DraftHeadKernels.topKPartBytes(b, topK, vocab)) : 0;
        argmaxOut = walkOut;
        proj = alloc(2L * b * Math.max(1, c.selectorRank()));
        feat = alloc(2L * maxRows * taps * h);
        ctx = alloc(2L * maxRows * h);
        ck = alloc(2L * maxRows * kw);
        cv = alloc(2L * maxRows * kw);
        irope = alloc(4L * maxRows * c.headDim() + 16L * maxRows * c.layers() + 4L * maxRows);
        logitsHost = arena.allocate(2L * block * vocab, 64);
        idsHost = arena.allocate(4L * b + 8L * b * topK, 64);
        projHost = arena.allocate(2L * block * Math.max(1, c.selectorRank()), 64);
        injectStaging = cuda.allocHost(2L * maxRows * taps * h + 4L * maxRows * c.headDim() + 16L * maxRows * c.layers() + 4L * maxRows);
        uploadInts(pos, IntStream.range(0, Math.max(b, maxRows)).toArray());
        // the GEMM plans of the head's shapes, and the tensor maps of its weights and inputs
        w.prepare(linear, taps);
        linear.prepare(lmHead);
        for (long[] in2 : new long[][]{{feat, maxRows, taps * h}, {ctx, maxRows, h}, {xn, b, h}, {conv, b, h}, {att, b, qd}, {act, b, in}, {picked, b, h}}) {
            linear.input(in2[0], (int) in2[1], (int) in2[2]);
        }
    }

    private int kvWidth() {
        return c.kvHeads() * c.headDim();
    }

    private int dynWidth() {
        return c.kind() == DraftHeadConfig.Kind.DFLASH2 ? 2 * c.convKernel() * (c.hidden() / c.convGroup()) : 1;
    }

    private long alloc(long bytes) {
        long p = cuda.alloc(Math.max(bytes, 16));
        allocations.add(p);
        return p;
    }

    private void uploadInts(long dst, int[] values) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(4L * values.length, 16);
            m.copyFrom(MemorySegment.ofArray(values));
            cuda.copyToDevice(dst, m);
        }
    }

    /**
     * The injection's launches over n staged rows; ropeBytes and addrBytes: the staged inputs' layout as the head wrote it
     * (set by n). With {@code dt} the taps are gathered from the target's tap buffer, else they were copied to feat.
     */
    void launchInjection(int n, long ropeBytes, long addrBytes, CudaForwardPass.DeviceTaps dt) {
        int h = c.hidden(), kw = kvWidth(), in = taps * h;
        long sin = irope + ropeBytes, kAddr = irope + 2 * ropeBytes, vAddr = kAddr + addrBytes, stepRowIdx = vAddr + addrBytes;
        if (dt != null) {
            k.draft().gatherTaps(dt.buffer(), dt.rows(), h, taps, stepRowIdx, feat, n);
        }
        linear.apply(feat, n, in, w.get("fc.weight"), h, ctx);
        k.rmsNorm(ctx, w.get("hidden_norm.weight"), ctx, n, h, c.rmsNormEps());
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".self_attn.";
            linear.apply(ctx, n, h, w.get(p + "k_proj.weight"), kw, ck);
            linear.apply(ctx, n, h, w.get(p + "v_proj.weight"), kw, cv);
            k.rmsNorm(ck, w.get(p + "k_norm.weight"), ck, n * c.kvHeads(), c.headDim(), c.rmsNormEps());
            k.rope(ck, kw, irope, sin, pos, n, c.kvHeads(), c.headDim());
            k.draft().scatterKv(ck, cv, kw, kAddr + 8L * l * n, vAddr + 8L * l * n, n);
        }
    }

    /** The block forward's launches over n staged rows of which d are drafted. */
    void launchBlockForward(int n, int d) {
        int h = c.hidden(), kw = kvWidth(), qd = c.heads() * c.headDim(), in = c.intermediate();
        long ids = dmeta + 4L * dsIds, inBlock = dmeta + 4L * dsInBlock, gather = dmeta + 4L * dsGather, rowSeq = dmeta + 4L * dsRowSeq;
        long seqs = dmeta + 4L * dsSeqs, cosT = dmeta + dsCos, sinT = dmeta + dsSin;
        k.embed(ids, embedding, x, n, h);
        if (c.inputEmbeddingScale() != 1f) {
            k.draft().shapeLogits(x, (long) n * h, c.inputEmbeddingScale(), 0f);
        }
        boolean two = c.kind() == DraftHeadConfig.Kind.DFLASH2;
        int groups = two ? h / c.convGroup() : 1, dynW = dynWidth();
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".";
            k.rmsNorm(x, w.get(p + "input_layernorm.weight"), xn, n, h, c.rmsNormEps());
            long attIn = xn;
            if (two) {
                linear.apply(xn, n, h, w.get(p + "attention_conv.kernel_projection.weight"), dynW, dyn);
                k.draft().dynConv(xn, dyn, dynW, 0, w.get(p + "attention_conv.base_kernel"), conv, inBlock, n, h, c.convGroup(), c.convKernel());
                attIn = conv;
            }
            String a = p + "self_attn.";
            linear.apply(attIn, n, h, w.get(a + "q_proj.weight"), qd, q);
            linear.apply(attIn, n, h, w.get(a + "k_proj.weight"), kw, kb);
            linear.apply(attIn, n, h, w.get(a + "v_proj.weight"), kw, vb);
            k.rmsNorm(q, w.get(a + "q_norm.weight"), q, n * c.heads(), c.headDim(), c.rmsNormEps());
            k.rmsNorm(kb, w.get(a + "k_norm.weight"), kb, n * c.kvHeads(), c.headDim(), c.rmsNormEps());
            k.rope(q, qd, cosT, sinT, pos, n, c.heads(), c.headDim());
            k.rope(kb, kw, cosT, sinT, pos, n, c.kvHeads(), c.headDim());
            k.draft().draftAttention(q, dmeta + dsCtx + 16L * l * DRAFT_SEQUENCES, seqs, rowSeq, kb, vb, att, n, c.heads(), c.kvHeads(), c.headDim(),
                    c.sliding()[l] ? c.slidingWindow() : 0);
            linear.apply(att, n, qd, w.get(a + "o_proj.weight"), h, o);
            residual(two, o, p + "attention_conv.base_kernel", groups, dynW, inBlock, n);
            k.rmsNorm(x, w.get(p + "post_attention_layernorm.weight"), xn, n, h, c.rmsNormEps());
            long mlpIn = xn;
            if (two) {
                linear.apply(xn, n, h, w.get(p + "mlp_conv.kernel_projection.weight"), dynW, dyn);
                k.draft().dynConv(xn, dyn, dynW, 0, w.get(p + "mlp_conv.base_kernel"), conv, inBlock, n, h, c.convGroup(), c.convKernel());
                mlpIn = conv;
            }
            linear.apply(mlpIn, n, h, w.get(p + "mlp.gate_up.weight"), 2 * in, gateUp);
            k.swiglu(gateUp, act, n, in);
            linear.apply(act, n, in, w.get(p + "mlp.down_proj.weight"), h, mlp);
            residual(two, mlp, p + "mlp_conv.base_kernel", groups, dynW, inBlock, n);
        }
        k.rmsNorm(x, w.get("norm.weight"), xn, n, h, c.rmsNormEps());
        k.embed(gather, xn, picked, d, h); // the drafted rows (each block's rows 1..)
        linear.apply(picked, d, lmHead, logits);
        if (c.outputMultiplier() != 1f || c.softcap() > 0) {
            k.draft().shapeLogits(logits, (long) d * vocab, c.outputMultiplier(), c.softcap());
        }
        if (two) {
            linear.apply(picked, d, h, w.get("candidate_selector.hidden_projection.weight"), c.selectorRank(), proj);
        } else {
            k.argmax(logits, d, vocab, argmaxOut);
        }
        if (deviceWalk) {
            k.draft().rowTopK(logits, d, vocab, c.selectorTopK(), walkParts); // every drafted row's candidates at once; the walks then go row by row
        }
    }

    /** x += out, through DFlash2's output convolution (the base kernel's second half) first. */
    private void residual(boolean two, long out, String baseKernel, int groups, int dynW, long inBlock, int n) {
        int h = c.hidden();
        if (two) {
            k.draft().dynConv(out, dyn, dynW, c.convKernel() * groups, w.get(baseKernel) + (long) c.convKernel() * h * 2, conv, inBlock, n, h,
                    c.convGroup(), c.convKernel());
            k.residualAdd(x, conv, (long) n * h);
        } else {
            k.residualAdd(x, out, (long) n * h);
        }
    }

    /** Frees the buffers (and the GEMMs' cached tensor maps of them) and the host staging. */
    @Override
    public void close() {
        allocations.forEach(linear::forget);
        allocations.forEach(cuda::free);
        allocations.clear();
        cuda.freeHost(injectStaging);
        cuda.freeHost(draftStaging);
        arena.close();
    }
}

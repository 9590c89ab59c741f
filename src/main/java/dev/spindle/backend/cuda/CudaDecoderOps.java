package dev.spindle.backend.cuda;

import dev.spindle.backend.DecoderOps;
import dev.spindle.model.ModelConfig;

/**
 * {@link DecoderOps} on an NVIDIA GPU: each op adds its kernel launches to a step's {@link Launches}, run at once or
 * captured as a CUDA graph. Here the decoder's ops meet the GPU's fusions: the residual add waits and runs inside the
 * next norm (add_rms_norm; a tap reads x + branch), q|k|v with rope_kv_write and gate|up with SwiGLU run as one paired
 * launch where {@link PairedLaunches} says so, decode rows' attention runs in split CTAs and a merge, and a
 * tensor-parallel rank's row-parallel GEMMs write fp32 partials and cut the launches for the group's all-reduce.
 */
final class CudaDecoderOps implements DecoderOps {
    /** Times each launch under a name when profiling ({@link CudaForwardPass#profileStep}); runs it otherwise. */
    interface Timer {
        void op(String name, Runnable launch);
    }

    private final ModelConfig c;
    private final CudaKernels k;
    private final Linear linear;
    private final PairedLaunches pairing;
    private final CudaWeights w;
    private final StepBuffers b;
    private final KvPool kv;
    private final int blockSize;
    private final StepPlan p;
    private final Timer timer;
    final Launches launches = new Launches();
    /** The step's integers on the device (StepPlan.data), read at launch. */
    private final long m;
    private final int n;
    /** Whether x + proj is owed to x: the add runs inside the next norm (or a tap's sum). */
    private boolean pendingAdd;

    CudaDecoderOps(ModelConfig c, CudaKernels k, Linear linear, PairedLaunches pairing, CudaWeights w, StepBuffers b, KvPool kv,
                   int blockSize, StepPlan p, Timer timer) {
        this.c = c;
        this.k = k;
        this.linear = linear;
        this.pairing = pairing;
        this.w = w;
        this.b = b;
        this.kv = kv;
        this.blockSize = blockSize;
        this.p = p;
        this.timer = timer;
        this.m = b.meta();
        this.n = p.rows;
    }

    private void add(String name, Runnable launch) {
        launches.add(() -> timer.op(name, launch));
    }

    @Override
    public void embed() {
        add("embed", () -> k.embed(m + 4L * p.tokens, w.embedding(), b.x, n, c.hiddenSize()));
    }

    @Override
    public void inputNorm(int layer) {
        norm(w.layer(layer).inputNorm());
    }

    @Override
    public void postAttentionNorm(int layer) {
        norm(w.layer(layer).postAttnNorm());
    }

    private void norm(long weight) {
        int h = c.hiddenSize();
        float eps = c.rmsNormEps();
        if (pendingAdd) {
            add("norms", () -> k.addRmsNorm(b.x, b.proj, weight, b.xn, n, h, eps));
        } else {
            add("norms", () -> k.rmsNorm(b.x, weight, b.xn, n, h, eps));
        }
        pendingAdd = false;
    }

    @Override
    public void qkvRopeKvWrite(int layer, int executed) {
        int stride = c.qDim() + 2 * c.kvDim();
        DeviceMatrix qkvWeight = w.layer(layer).qkv();
        long kvSlot = kv.slot(executed);
        if (pairing.pairs(true, n)) {
            PairedEpilogue.RopeKvWrite rope = pairing.rope(b.cos, b.sin, m + 4L * p.positions, kvSlot, m + 4L * p.slotMap);
            add("gemm qkv + rope_kv_write", () -> pairing.apply(rope, b.xn, n, qkvWeight, b.qkv, 0));
        } else {
            add("gemm qkv", () -> linear.apply(b.xn, n, qkvWeight, b.qkv));
            if (kv.kv8) {
                add("rope_kv_write", () -> k.fp8().ropeKvWrite(b.qkv, stride, b.cos, b.sin, m + 4L * p.positions, n, c.numHeads(), c.numKvHeads(),
                        c.headDim(), kvSlot, m + 4L * p.slotMap, blockSize));
            } else {
                add("rope_kv_write", () -> k.ropeKvWrite(b.qkv, stride, b.cos, b.sin, m + 4L * p.positions, n, c.numHeads(), c.numKvHeads(),
                        c.headDim(), kvSlot, m + 4L * p.slotMap, blockSize));
            }
        }
    }

    @Override
    public void attention(int executed) {
        int heads = c.numHeads(), kvh = c.numKvHeads(), hd = c.headDim(), bs = blockSize, stride = c.qDim() + 2 * c.kvDim();
        float scale = (float) Math.pow(c.headDim(), -0.5);
        long kvSlot = kv.slot(executed);
        long tables = m + 4L * p.tables, desc = m + 4L * p.desc, cdesc = m + 4L * p.cdesc;
        if (p.decodeRows > 0) {
            add("attention decode splits", () -> attention(AttentionKernels.DECODE, p.decodeCtas, b.qkv, stride, b.att, kvSlot, tables, desc,
                    b.partO(), b.partML(), heads, kvh, hd, bs, scale));
            if (p.partials > 0) { // none when every decode row's CTA folds its splits itself (StepPlan.folds)
                add("attention decode merge", () -> k.attentionMerge(p.decodeRows, p.mergeSplits, b.partO(), b.partML(), cdesc, b.att, heads, hd));
            }
        }
        if (p.ctas > p.decodeCtas) {
            int kernel = p.prefillKernel;
            add("attention prefill", () -> attention(kernel, p.ctas - p.decodeCtas, b.qkv, stride, b.att, kvSlot, tables,
                    desc + 32L * p.decodeCtas, b.partO(), b.partML(), heads, kvh, hd, bs, scale));
        }
    }

    /** The attention kernel of {@code kind} over this pass's pool: bf16, or the fp8 twin. */
    private void attention(int kind, int ctas, long qkv, int stride, long out, long pool, long tables, long desc, long partO, long partML,
                           int heads, int kvHeads, int headDim, int blockSize, float scale) {
        if (kv.kv8) {
            k.fp8().attention(kind, ctas, qkv, stride, out, pool, tables, desc, partO, partML, heads, kvHeads, headDim, blockSize, scale);
        } else {
            k.attention(kind, ctas, qkv, stride, out, pool, tables, desc, partO, partML, heads, kvHeads, headDim, blockSize, scale);
        }
    }

    @Override
    public void outProj(int layer) {
        rowParallel("gemm o", b.att, w.layer(layer).o(), 0);
    }

    @Override
    public void gateUpSwiglu(int layer) {
        int in = c.intermediateSize();
        DeviceMatrix gateUp = w.layer(layer).gateUp();
        if (pairing.pairs(false, n)) {
            PairedEpilogue.Swiglu swiglu = pairing.swiglu();
            add("gemm gate_up + swiglu", () -> pairing.apply(swiglu, b.xn, n, gateUp, b.act, b.gateUp));
        } else {
            add("gemm gate_up", () -> linear.apply(b.xn, n, gateUp, b.gateUp));
            add("swiglu", () -> k.swiglu(b.gateUp, b.act, n, in));
        }
    }

    @Override
    public void downProj(int layer) {
        rowParallel("gemm down", b.act, w.layer(layer).down(), 1);
    }

    /**
     * A row-parallel linear layer (o_proj, down_proj) into proj: at one rank its bf16 output; at several, this rank's fp32
     * partial into partial buffer {@code buffer}, and a cut, after which the group's all-reduce writes proj.
     */
    private void rowParallel(String name, long in, DeviceMatrix weight, int buffer) {
        if (b.partial == null) {
            add(name, () -> linear.apply(in, n, weight, b.proj));
        } else {
            long out = b.partial[buffer];
            add(name, () -> linear.applyPartial(in, n, weight, out));
            launches.cut(buffer);
        }
    }

    @Override
    public void addResidual() {
        if (pendingAdd) {
            throw new IllegalStateException("a sublayer's add while the previous one still waits for its norm");
        }
        pendingAdd = true;
    }

    @Override
    public void tap(int index) {
        long dst = b.taps() + (long) index * n * c.hiddenSize() * 2;
        long count = (long) n * c.hiddenSize();
        if (!pendingAdd) {
            throw new IllegalStateException("a tap reads the residual stream right after a sublayer's add");
        }
        // the residual stream is x + proj (the add waits for the next norm): written out here
        launches.add(() -> k.residualSum(dst, b.x, b.proj, count));
    }

    @Override
    public void finalNorm() {
        int h = c.hiddenSize();
        float eps = c.rmsNormEps();
        boolean add = pendingAdd;
        add("norms", () -> {
            if (add) {
                k.residualAdd(b.x, b.proj, (long) n * h);
            }
            k.rmsNorm(b.x, w.finalNorm(), b.x, n, h, eps);
        });
        pendingAdd = false;
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.backend.CandidateSelector;
import dev.spindle.backend.ContextHead;
import dev.spindle.backend.DraftContexts;
import dev.spindle.backend.RotaryTable;
import dev.spindle.model.Bf16;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Matrix;
import dev.spindle.model.Tensor;
import dev.spindle.sample.Sampler;
import dev.spindle.step.Proposal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Map;

/**
 * The CPU reference of a DFlash / DFlash2 draft head, at HF's bf16 rounding points (every linear,
 * norm, product and sum rounded to bf16 where the PyTorch reference rounds; attention scores and
 * softmax in fp32, as sdpa's math).
 *
 * <p>Context: each committed row's taps, concatenated, go through {@code fc} and {@code hidden_norm},
 * then through every layer's {@code k_proj} (+ {@code k_norm}, RoPE at the row's position) and
 * {@code v_proj} into the head's own K/V; the head never runs its layers over context. A draft: the
 * target's embeddings of [anchor, mask x n] at the anchor's position onward, each layer attending
 * bidirectionally to the context and the block (within {@code sliding_window} positions on sliding
 * layers), DFlash2's dynamic depthwise convolutions around attention and MLP (causal over the block's
 * rows, zero before its first), the final norm, the target's output head on rows 1..n (times
 * {@code output_multiplier}, soft-capped), then argmax per row (DFlash) or the candidate selector's
 * greedy walk over each row's top-K (DFlash2).
 */
public final class CpuDraftHead extends ContextHead<CpuDraftHead.Context> {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final Map<String, Tensor> w;
    private final MemorySegment embedding;
    private final Matrix lmHead;
    private final Map<String, Matrix> linear;
    private final int vocab;
    private final Parallel parallel;
    private final boolean ownsParallel;
    private final MatMul matMul;
    private final RotaryTable rotary;
    private float[][] lastLogits;

    /** One sequence's context: per layer the K (roped, normed) and V rows, from position {@code start}. */
    final class Context extends DraftContexts.Span {
        float[][] k = new float[c.layers()][];
        float[][] v = new float[c.layers()][];

        Context(int start) {
            this.start = start;
            for (int l = 0; l < c.layers(); l++) {
                k[l] = new float[0];
                v[l] = new float[0];
            }
        }

        void ensure(int more) {
            int need = (rows + more) * kvWidth();
            if (k[0].length < need) {
                int cap = Math.max(need, k[0].length * 2);
                for (int l = 0; l < c.layers(); l++) {
                    k[l] = Arrays.copyOf(k[l], cap);
                    v[l] = Arrays.copyOf(v[l], cap);
                }
            }
        }
    }

    /**
     * @param weights    the head's tensors by name (without a {@code model.} prefix)
     * @param embedding  the target's input embedding (vocab, hidden), bf16
     * @param lmHead     the target's output head (vocab, hidden), in its format
     * @param tapLayers  the executed target layers read, in the fc input's order
     * @param threads    CPU threads for the head's matmuls
     * @param resources  closed with the head (the arena its weights live in), or null
     */
    public CpuDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, MemorySegment embedding, Matrix lmHead, int vocab,
                        int[] tapLayers, int threads, AutoCloseable resources) {
        this(config, weights, embedding, lmHead, vocab, tapLayers, threads, resources, m -> m);
    }

    /**
     * As above, each linear layer ({@link #isLinear}) held in the format {@code linearFormat} gives its bf16 matrix (packed at
     * load: {@link dev.spindle.model.AffineQuantizer}); the norms, the codebooks and the target's embedding and head as they are.
     */
    public CpuDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, MemorySegment embedding, Matrix lmHead, int vocab,
                        int[] tapLayers, int threads, AutoCloseable resources, java.util.function.Function<Bf16Matrix, Matrix> linearFormat) {
        super(config, tapLayers, x -> { });
        owning(resources);
        this.w = Map.copyOf(weights);
        Map<String, Matrix> lin = new java.util.HashMap<>();
        weights.forEach((name, t) -> {
            if (isLinear(name, t)) {
                lin.put(name, linearFormat.apply(new Bf16Matrix(t)));
            }
        });
        this.linear = Map.copyOf(lin);
        this.embedding = embedding;
        this.lmHead = lmHead;
        this.vocab = vocab;
        this.parallel = new Parallel(Math.max(1, threads));
        this.ownsParallel = true;
        this.matMul = new MatMul(parallel);
        this.rotary = new RotaryTable(config.headDim(), config.ropeTheta());
    }

    private int kvWidth() {
        return c.kvHeads() * c.headDim();
    }

    /** The head's linear layers: two-dimensional weights read by a matmul (fc, the projections, the selector's). */
    public static boolean isLinear(String name, Tensor t) {
        return t.shape().length == 2 && (name.equals("fc.weight") || name.endsWith("_proj.weight") || name.endsWith("projection.weight"));
    }

    /** out = x @ W^T for the linear layer {@code name} in its format. */
    private void linear(float[] x, int n, String name, float[] out) {
        Matrix m = linear.get(name);
        if (m == null) {
            throw new IllegalStateException("the draft head has no linear layer " + name);
        }
        matMul.apply(x, n, m, out);
    }

    /** The format of the head's linear layers, as the start log names it. */
    public String linearFormat() {
        return linear.values().stream().map(Matrix::format).distinct().sorted().collect(java.util.stream.Collectors.joining(", "));
    }

    private MemorySegment t(String name) {
        Tensor x = w.get(name);
        if (x == null) {
            throw new IllegalStateException("the draft head has no tensor " + name);
        }
        return x.data();
    }


    @Override
    public void inject(long id, int from, float[][] rows, int count) {
        if (count == 0) {
            return;
        }
        Context x = contexts.extendAt(id, from, () -> new Context(from));
        int h = c.hidden();
        int in = taps.length * h;
        float[] feat = new float[count * in];
        for (int r = 0; r < count; r++) {
            if (rows[r].length != in) {
                throw new IllegalArgumentException("a tapped row has " + rows[r].length + " values, the head reads " + in);
            }
            System.arraycopy(rows[r], 0, feat, r * in, in);
        }
        float[] ctx = new float[count * h];
        linear(feat, count, "fc.weight", ctx);
        CpuKernels.rmsNorm(ctx, count, h, t("hidden_norm.weight"), c.rmsNormEps(), ctx);
        float[] cos = new float[count * c.headDim() / 2], sin = new float[count * c.headDim() / 2];
        rotary.fill(from, count, cos, sin);
        x.ensure(count);
        int kw = kvWidth();
        float[] k = new float[count * kw], v = new float[count * kw];
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".self_attn.";
            linear(ctx, count, p + "k_proj.weight", k);
            linear(ctx, count, p + "v_proj.weight", v);
            CpuKernels.rmsNorm(k, count * c.kvHeads(), c.headDim(), t(p + "k_norm.weight"), c.rmsNormEps(), k);
            CpuKernels.rope(k, count, c.kvHeads(), c.headDim(), cos, sin);
            System.arraycopy(k, 0, x.k[l], x.rows * kw, count * kw);
            System.arraycopy(v, 0, x.v[l], x.rows * kw, count * kw);
        }
        x.rows += count;
    }

    @Override
    public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
        if (drafts < 1 || drafts > c.blockSize() - 1) {
            throw new IllegalArgumentException("a block drafts 1.." + (c.blockSize() - 1) + " tokens, asked for " + drafts);
        }
        Context x = contexts.get(id);
        int position = x == null ? 0 : x.start + x.rows;
        int n = drafts + 1;
        int h = c.hidden();
        int[] ids = new int[n];
        Arrays.fill(ids, c.maskTokenId());
        ids[0] = anchor;
        float[] hs = new float[n * h];
        CpuKernels.embed(ids, embedding, vocab, h, hs);
        if (c.inputEmbeddingScale() != 1f) {
            float scale = c.inputEmbeddingScale(); // a Python float times a bf16 tensor: the product in fp32, rounded once
            for (int i = 0; i < hs.length; i++) {
                hs[i] = Bf16.round(hs[i] * scale);
            }
        }
        float[] hidden = forward(x, hs, n, position);
        // rows 1..n-1: the drafts' hidden states, through the target's head
        float[] rows = Arrays.copyOfRange(hidden, h, n * h);
        float[] logits = new float[drafts * vocab];
        matMul.apply(rows, drafts, lmHead, logits);
        shapeLogits(logits);
        float[][] out = new float[drafts][];
        for (int r = 0; r < drafts; r++) {
            out[r] = Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab);
        }
        lastLogits = out;
        boolean sampled = sampling != null && sampling.params().temperature() > 0;
        if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
            return selectorWalk(rows, out, anchor, sampled ? sampling : null);
        }
        int[] tokens = new int[drafts];
        float[][] q = sampled ? new float[drafts][] : null;
        for (int r = 0; r < drafts; r++) {
            if (sampled) {
                q[r] = Sampler.probabilities(out[r], sampling.params());
                tokens[r] = Sampler.drawFrom(q[r], sampling.rng());
            } else {
                tokens[r] = Sampler.argmax(out[r]);
            }
        }
        return new Proposal(tokens, q);
    }

    @Override
    public float[][] lastLogits() {
        return lastLogits;
    }

    /** The reference's compute_logits: times output_multiplier, then tanh soft-capping, each in bf16. */
    private void shapeLogits(float[] logits) {
        if (c.outputMultiplier() != 1f) {
            float m = c.outputMultiplier();
            for (int i = 0; i < logits.length; i++) {
                logits[i] = Bf16.round(logits[i] * m);
            }
        }
        if (c.softcap() > 0) {
            float cap = c.softcap();
            for (int i = 0; i < logits.length; i++) {
                float scaled = Bf16.round(logits[i] / cap);
                logits[i] = Bf16.round(Bf16.round((float) StrictMath.tanh(scaled)) * cap);
            }
        }
    }

    /** The block's layers: returns the final-normed hidden rows (n, hidden). */
    private float[] forward(Context x, float[] hs, int n, int position) {
        int h = c.hidden();
        float[] normed = new float[n * h];
        float[] cos = new float[n * c.headDim() / 2], sin = new float[n * c.headDim() / 2];
        rotary.fill(position, n, cos, sin);
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".";
            CpuKernels.rmsNorm(hs, n, h, t(p + "input_layernorm.weight"), c.rmsNormEps(), normed);
            float[] finishKernel = null;
            float[] attnIn = normed;
            if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
                float[][] conv = convPrepare(normed, n, p + "attention_conv.");
                attnIn = conv[0];
                finishKernel = conv[1];
            }
            float[] attn = attention(x, attnIn, n, position, l, cos, sin);
            if (finishKernel != null) {
                attn = convolve(attn, n, finishKernel, t(p + "attention_conv.base_kernel"), 1);
            }
            CpuKernels.addInto(hs, attn, n * h);
            CpuKernels.rmsNorm(hs, n, h, t(p + "post_attention_layernorm.weight"), c.rmsNormEps(), normed);
            float[] mlpIn = normed;
            finishKernel = null;
            if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
                float[][] conv = convPrepare(normed, n, p + "mlp_conv.");
                mlpIn = conv[0];
                finishKernel = conv[1];
            }
            float[] mlp = mlp(mlpIn, n, p + "mlp.");
            if (finishKernel != null) {
                mlp = convolve(mlp, n, finishKernel, t(p + "mlp_conv.base_kernel"), 1);
            }
            CpuKernels.addInto(hs, mlp, n * h);
        }
        float[] out = new float[n * h];
        CpuKernels.rmsNorm(hs, n, h, t("norm.weight"), c.rmsNormEps(), out);
        return out;
    }

    private float[] mlp(float[] x, int n, String p) {
        int h = c.hidden(), m = c.intermediate();
        float[] gate = new float[n * m], up = new float[n * m];
        linear(x, n, p + "gate_proj.weight", gate);
        linear(x, n, p + "up_proj.weight", up);
        CpuKernels.swiGlu(gate, up, n * m);
        float[] out = new float[n * h];
        linear(gate, n, p + "down_proj.weight", out);
        return out;
    }

    /**
     * The block's attention: queries of the block's rows against the context's keys and the block's own,
     * bidirectional, within the sliding window on sliding layers; scores and softmax in fp32, the output
     * rounded to bf16, then o_proj.
     */
    private float[] attention(Context x, float[] in, int n, int position, int layer, float[] cos, float[] sin) {
        int h = c.hidden(), d = c.headDim(), heads = c.heads(), kvh = c.kvHeads(), kw = kvWidth();
        String p = "layers." + layer + ".self_attn.";
        float[] q = new float[n * heads * d], k = new float[n * kw], v = new float[n * kw];
        linear(in, n, p + "q_proj.weight", q);
        linear(in, n, p + "k_proj.weight", k);
        linear(in, n, p + "v_proj.weight", v);
        CpuKernels.rmsNorm(q, n * heads, d, t(p + "q_norm.weight"), c.rmsNormEps(), q);
        CpuKernels.rmsNorm(k, n * kvh, d, t(p + "k_norm.weight"), c.rmsNormEps(), k);
        CpuKernels.rope(q, n, heads, d, cos, sin);
        CpuKernels.rope(k, n, kvh, d, cos, sin);
        int ctxRows = x == null ? 0 : x.rows;
        int ctxStart = x == null ? 0 : x.start;
        float[] ck = x == null ? new float[0] : x.k[layer], cv = x == null ? new float[0] : x.v[layer];
        boolean sliding = c.sliding()[layer];
        int window = c.slidingWindow();
        float scale = (float) (1.0 / Math.sqrt(d));
        int group = heads / kvh;
        float[] out = new float[n * heads * d];
        int keys = ctxRows + n;
        parallel.forRange(n * heads, 1, (a, b) -> {
            float[] scores = new float[keys];
            float[] acc = new float[d];
            for (int rh = a; rh < b; rh++) {
                int r = rh / heads, head = rh % heads, kv = head / group;
                int qpos = position + r;
                int qo = (r * heads + head) * d;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < keys; j++) {
                    int kpos = j < ctxRows ? ctxStart + j : position + (j - ctxRows);
                    if (sliding && Math.abs(qpos - kpos) >= window) {
                        scores[j] = Float.NEGATIVE_INFINITY;
                        continue;
                    }
                    float[] kk = j < ctxRows ? ck : k;
                    int ko = (j < ctxRows ? j : j - ctxRows) * kw + kv * d;
                    float s = 0;
                    for (int i = 0; i < d; i++) {
                        s = Math.fma(q[qo + i], kk[ko + i], s);
                    }
                    scores[j] = s * scale;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0;
                for (int j = 0; j < keys; j++) {
                    scores[j] = scores[j] == Float.NEGATIVE_INFINITY ? 0 : (float) StrictMath.exp(scores[j] - max);
                    sum += scores[j];
                }
                Arrays.fill(acc, 0);
                for (int j = 0; j < keys; j++) {
                    if (scores[j] == 0) {
                        continue;
                    }
                    float pj = scores[j] / sum;
                    float[] vv = j < ctxRows ? cv : v;
                    int vo = (j < ctxRows ? j : j - ctxRows) * kw + kv * d;
                    for (int i = 0; i < d; i++) {
                        acc[i] = Math.fma(pj, vv[vo + i], acc[i]);
                    }
                }
                for (int i = 0; i < d; i++) {
                    out[qo + i] = Bf16.round(acc[i]);
                }
            }
        });
        float[] o = new float[n * h];
        linear(out, n, p + "o_proj.weight", o);
        return o;
    }

    /**
     * DFlash2's GroupedDynamicCausalConv.prepare: the per-row dynamic taps from {@code kernel_projection}
     * ([2][taps][groups]: the first half convolves the sublayer's input, the second its output), and the
     * input convolved with the first half and {@code base_kernel[0]}. Returns {convolved input, the second half}.
     */
    private float[][] convPrepare(float[] x, int n, String p) {
        int h = c.hidden(), groups = h / c.convGroup(), taps = c.convKernel();
        int width = 2 * taps * groups;
        float[] dyn = new float[n * width];
        linear(x, n, p + "kernel_projection.weight", dyn);
        float[] first = new float[n * taps * groups], second = new float[n * taps * groups];
        for (int r = 0; r < n; r++) {
            System.arraycopy(dyn, r * width, first, r * taps * groups, taps * groups);
            System.arraycopy(dyn, r * width + taps * groups, second, r * taps * groups, taps * groups);
        }
        return new float[][]{convolve(x, n, first, t(p + "base_kernel"), 0), second};
    }

    /**
     * {@code out[t] = sum over taps o of base[half][o] * x[t - o] + dynamic[t][o][group] * x[t - o]}, causal over
     * the block's rows (x before the first row is zero), accumulated in the reference's order and rounding:
     * {@code out = bf16(out + bf16(base * x))}, then {@code out = bf16(out + dynamic * x)} (one fused rounding).
     */
    private float[] convolve(float[] x, int n, float[] dynamic, MemorySegment base, int half) {
        int h = c.hidden(), gs = c.convGroup(), groups = h / gs, taps = c.convKernel();
        float[] out = new float[n * h];
        for (int o = 0; o < taps; o++) {
            long baseRow = ((long) half * taps + o) * h;
            for (int r = 0; r < n; r++) {
                int src = r - o;
                for (int g = 0; g < groups; g++) {
                    float dk = dynamic[(r * taps + o) * groups + g];
                    for (int i = 0; i < gs; i++) {
                        int ch = g * gs + i;
                        float val = src < 0 ? 0f : x[src * h + ch];
                        float b = Bf16.toFloat(base.get(BF16, 2 * (baseRow + ch)));
                        float acc = Bf16.round(out[r * h + ch] + Bf16.round(b * val));
                        out[r * h + ch] = Bf16.round(acc + dk * val);
                    }
                }
            }
        }
        return out;
    }

    /**
     * DFlash2's candidate selector: for each row the target head's top-K tokens, scored by their logit plus a
     * low-rank pair term {@code <predecessor_codebook[prev] * hidden_projection(row), successor_codebook[cand]>}
     * (each product and the sum in bf16). Greedy: the best becomes the row's draft and the next row's
     * predecessor. Sampled: the draft is drawn from the softmax of the scores at the request's temperature
     * (the reference's walk: no top-k or top-p on the K candidates), and that distribution is the row's q.
     */
    private Proposal selectorWalk(float[] rows, float[][] logits, int anchor, Sampling sampling) {
        int drafts = logits.length, rank = c.selectorRank(), h = c.hidden();
        float[] proj = new float[drafts * rank];
        linear(rows, drafts, "candidate_selector.hidden_projection.weight", proj);
        return CandidateSelector.walk(logits, proj, rank, c.selectorTopK(), t("candidate_selector.predecessor_codebook"), t("candidate_selector.successor_codebook"),
                anchor, sampling);
    }

    @Override
    public String describe() {
        return c.describe() + " on the CPU";
    }

    @Override
    public void close() {
        contexts.clear();
        if (ownsParallel) {
            parallel.close();
        }
        closeResources();
    }
}

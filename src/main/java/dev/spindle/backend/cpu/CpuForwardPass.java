package dev.spindle.backend.cpu;

import dev.spindle.backend.ForwardPass;
import dev.spindle.engine.kv.BlockPool;
import dev.spindle.engine.kv.BlockTable;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;

/**
 * The reference forward pass on the CPU, for stock and looped llama, in HF's bf16
 * numerics. Decoder layer (pre-norm):
 * {@code h = x + o(attn(rope(q(n1)), rope(k(n1)), v(n1)))}, {@code n1 = rms(x)};
 * {@code out = h + down(silu(gate(n2)) * up(n2))}, {@code n2 = rms(h)}.
 * The looped family runs the L layers numLoops times, the final norm after each loop
 * unless skip_loop_final_norm.
 */
public final class CpuForwardPass implements ForwardPass {
    private final ModelConfig c;
    private final ModelWeights w;
    private final Parallel parallel;
    private final MatMul matMul;
    private final PagedAttention attention;
    private final RotaryTable rotary;
    private final CpuKvStore kv;
    private final BlockPool pool;
    private final KvSlots slots;

    /**
     * @param kvBlocks  blocks in the KV pool
     * @param blockSize tokens per block
     */
    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize, int threads, KvSlots slots) {
        this.c = config;
        this.w = weights;
        this.parallel = new Parallel(threads);
        this.matMul = new MatMul(parallel);
        this.attention = new PagedAttention(parallel);
        this.rotary = new RotaryTable(config.headDim(), config.ropeTheta());
        int slotCount = slots == KvSlots.PER_EXECUTED_LAYER ? config.executedLayers() : config.numLayers();
        this.kv = new CpuKvStore(kvBlocks, slotCount, blockSize, config.numKvHeads(), config.headDim());
        this.pool = new BlockPool(kvBlocks, blockSize);
        this.slots = slots;
    }

    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize) {
        this(config, weights, kvBlocks, blockSize, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER);
    }

    @Override
    public ModelConfig config() {
        return c;
    }

    @Override
    public BlockPool blockPool() {
        return pool;
    }

    @Override
    public float[][] forward(int[] tokens, BlockTable table, boolean allLogits) {
        int n = tokens.length;
        if (n == 0) {
            throw new IllegalArgumentException("empty window");
        }
        int start = table.tokens();
        if (start + n > c.maxPositions()) {
            throw new IllegalArgumentException("positions up to " + (start + n) + " exceed max_position_embeddings " + c.maxPositions());
        }
        table.reserve(start + n);
        int hidden = c.hiddenSize(), qd = c.qDim(), kvd = c.kvDim(), inter = c.intermediateSize();
        float[] x = new float[n * hidden];        // residual stream (n, H)
        float[] xn = new float[n * hidden];       // normed (n, H)
        float[] q = new float[n * qd];            // (n, heads, headDim)
        float[] k = new float[n * kvd];           // (n, kvHeads, headDim)
        float[] v = new float[n * kvd];
        float[] att = new float[n * qd];
        float[] proj = new float[n * hidden];     // o_proj and down_proj outputs (n, H)
        float[] gate = new float[n * inter];      // (n, I)
        float[] up = new float[n * inter];
        float[] cos = new float[n * c.headDim() / 2];
        float[] sin = new float[n * c.headDim() / 2];
        CpuKernels.embed(tokens, w.embedding().data(), c.vocabSize(), hidden, x);
        rotary.fill(start, n, cos, sin);
        for (int loop = 0; loop < c.numLoops(); loop++) {
            for (int l = 0; l < c.numLayers(); l++) {
                LayerWeights lw = w.layers().get(l);
                int slot = slots.slot(l, loop, c.numLayers());
                CpuKernels.rmsNorm(x, n, hidden, lw.inputNorm().data(), c.rmsNormEps(), xn);
                matMul.apply(xn, n, hidden, lw.q().data(), qd, q);
                matMul.apply(xn, n, hidden, lw.k().data(), kvd, k);
                matMul.apply(xn, n, hidden, lw.v().data(), kvd, v);
                CpuKernels.rope(q, n, c.numHeads(), c.headDim(), cos, sin);
                CpuKernels.rope(k, n, c.numKvHeads(), c.headDim(), cos, sin);
                for (int r = 0; r < n; r++) {
                    kv.write(table, slot, start + r, k, v, r * kvd);
                }
                attention.apply(q, n, start, c.numHeads(), c.numKvHeads(), kv, table, slot, att);
                matMul.apply(att, n, qd, lw.o().data(), hidden, proj);
                CpuKernels.addInto(x, proj, n * hidden);
                CpuKernels.rmsNorm(x, n, hidden, lw.postAttnNorm().data(), c.rmsNormEps(), xn);
                matMul.apply(xn, n, hidden, lw.gate().data(), inter, gate);
                matMul.apply(xn, n, hidden, lw.up().data(), inter, up);
                CpuKernels.swiGlu(gate, up, n * inter);
                matMul.apply(gate, n, inter, lw.down().data(), hidden, proj);
                CpuKernels.addInto(x, proj, n * hidden);
            }
            if (!c.skipLoopFinalNorm() || loop == c.numLoops() - 1) {
                CpuKernels.rmsNorm(x, n, hidden, w.finalNorm().data(), c.rmsNormEps(), x);
            }
        }
        table.advance(start + n);
        int rows = allLogits ? n : 1;
        float[] last = x;
        if (!allLogits) {
            last = new float[hidden];
            System.arraycopy(x, (n - 1) * hidden, last, 0, hidden);
        }
        float[] logits = new float[rows * c.vocabSize()];
        matMul.apply(last, rows, hidden, w.lmHead().data(), c.vocabSize(), logits);
        float[][] out = new float[rows][];
        for (int r = 0; r < rows; r++) {
            out[r] = java.util.Arrays.copyOfRange(logits, r * c.vocabSize(), (r + 1) * c.vocabSize());
        }
        return out;
    }

    @Override
    public void close() {
        parallel.close();
        kv.close();
    }
}

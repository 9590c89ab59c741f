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
        return forward(java.util.List.of(new Window(tokens, table, allLogits, true))).getFirst();
    }

    @Override
    public java.util.List<float[][]> forward(java.util.List<Window> windows) {
        int[] rowStart = ForwardPass.prepareWindows(c, windows);
        int n = rowStart[windows.size()];
        int hidden = c.hiddenSize(), qd = c.qDim(), kvd = c.kvDim(), inter = c.intermediateSize(), half = c.headDim() / 2;
        int[] tokens = new int[n];
        float[] x = new float[n * hidden];        // residual stream (n, H), rows of all windows
        float[] xn = new float[n * hidden];       // normed (n, H)
        float[] q = new float[n * qd];            // (n, heads, headDim)
        float[] k = new float[n * kvd];           // (n, kvHeads, headDim)
        float[] v = new float[n * kvd];
        float[] att = new float[n * qd];
        float[] proj = new float[n * hidden];     // o_proj and down_proj outputs (n, H)
        float[] gate = new float[n * inter];      // (n, I)
        float[] up = new float[n * inter];
        float[] cos = new float[n * half];
        float[] sin = new float[n * half];
        for (int i = 0; i < windows.size(); i++) {
            Window win = windows.get(i);
            System.arraycopy(win.tokens(), 0, tokens, rowStart[i], win.tokens().length);
            float[] wc = new float[win.tokens().length * half], ws = new float[win.tokens().length * half];
            rotary.fill(win.table().tokens(), win.tokens().length, wc, ws);
            System.arraycopy(wc, 0, cos, rowStart[i] * half, wc.length);
            System.arraycopy(ws, 0, sin, rowStart[i] * half, ws.length);
        }
        CpuKernels.embed(tokens, w.embedding().data(), c.vocabSize(), hidden, x);
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
                for (int i = 0; i < windows.size(); i++) {
                    Window win = windows.get(i);
                    int start = win.table().tokens();
                    for (int r = rowStart[i]; r < rowStart[i + 1]; r++) {
                        kv.write(win.table(), slot, start + r - rowStart[i], k, v, r * kvd);
                    }
                }
                for (int i = 0; i < windows.size(); i++) {
                    Window win = windows.get(i);
                    attention.apply(q, rowStart[i], rowStart[i + 1] - rowStart[i], win.table().tokens(), c.numHeads(), c.numKvHeads(),
                            kv, win.table(), slot, att);
                }
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
        // the head runs on the rows that need logits only
        int[] rowsOut = new int[n];
        int m = 0;
        for (int i = 0; i < windows.size(); i++) {
            Window win = windows.get(i);
            if (!win.wantLogits()) {
                continue;
            }
            for (int r = win.allLogits() ? rowStart[i] : rowStart[i + 1] - 1; r < rowStart[i + 1]; r++) {
                rowsOut[m++] = r;
            }
        }
        float[] picked = new float[m * hidden];
        for (int j = 0; j < m; j++) {
            System.arraycopy(x, rowsOut[j] * hidden, picked, j * hidden, hidden);
        }
        float[] logits = new float[m * c.vocabSize()];
        if (m > 0) {
            matMul.apply(picked, m, hidden, w.lmHead().data(), c.vocabSize(), logits);
        }
        java.util.List<float[][]> out = new java.util.ArrayList<>();
        int j = 0;
        for (int i = 0; i < windows.size(); i++) {
            Window win = windows.get(i);
            win.table().advance(win.table().tokens() + win.tokens().length);
            int rows = !win.wantLogits() ? 0 : win.allLogits() ? win.tokens().length : 1;
            float[][] wl = new float[rows][];
            for (int r = 0; r < rows; r++, j++) {
                wl[r] = java.util.Arrays.copyOfRange(logits, j * c.vocabSize(), (j + 1) * c.vocabSize());
            }
            out.add(wl);
        }
        return out;
    }

    @Override
    public void close() {
        parallel.close();
        kv.close();
    }
}

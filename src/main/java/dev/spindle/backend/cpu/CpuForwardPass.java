package dev.spindle.backend.cpu;

import dev.spindle.backend.ForwardPass;
import dev.spindle.backend.ModelStep;
import dev.spindle.backend.StepOutput;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;

import java.util.ArrayList;
import java.util.List;

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
    private final KvCapacity capacity;
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
        this.capacity = new KvCapacity(kvBlocks, blockSize);
        this.slots = slots;
    }

    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize) {
        this(config, weights, kvBlocks, blockSize, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER);
    }

    /** The model's weights (a draft head shares its embedding and output head). */
    public dev.spindle.model.ModelWeights weights() {
        return w;
    }

    @Override
    public ModelConfig config() {
        return c;
    }

    @Override
    public KvCapacity kvCapacity() {
        return capacity;
    }

    @Override
    public boolean supportsTaps() {
        return true;
    }

    @Override
    public StepOutput execute(ModelStep step) {
        List<ModelStep.Window> windows = step.windows();
        int[] rowStart = ForwardPass.checkWindows(this, step);
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
            ModelStep.Window win = windows.get(i);
            System.arraycopy(win.tokens(), 0, tokens, rowStart[i], win.tokens().length);
            float[] wc = new float[win.tokens().length * half], ws = new float[win.tokens().length * half];
            rotary.fill(win.start(), win.tokens().length, wc, ws);
            System.arraycopy(wc, 0, cos, rowStart[i] * half, wc.length);
            System.arraycopy(ws, 0, sin, rowStart[i] * half, ws.length);
        }
        int[] taps = step.tapLayers();
        List<float[][]> tapOut = new ArrayList<>();
        for (int i = 0; i < windows.size(); i++) {
            tapOut.add(windows.get(i).tap() ? new float[windows.get(i).tokens().length][taps.length * hidden] : null);
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
                    ModelStep.Window win = windows.get(i);
                    for (int r = rowStart[i]; r < rowStart[i + 1]; r++) {
                        kv.write(win.table(), slot, win.start() + r - rowStart[i], k, v, r * kvd);
                    }
                }
                for (int i = 0; i < windows.size(); i++) {
                    ModelStep.Window win = windows.get(i);
                    attention.apply(q, rowStart[i], rowStart[i + 1] - rowStart[i], win.start(), c.numHeads(), c.numKvHeads(),
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
                tap(taps, l + loop * c.numLayers(), x, windows, rowStart, tapOut);
            }
            if (!c.skipLoopFinalNorm() || loop == c.numLoops() - 1) {
                CpuKernels.rmsNorm(x, n, hidden, w.finalNorm().data(), c.rmsNormEps(), x);
            }
        }
        // the head runs on the rows that need logits only
        int m = 0;
        for (ModelStep.Window win : windows) {
            m += win.logitRows().length;
        }
        float[] picked = new float[m * hidden];
        int j = 0;
        for (int i = 0; i < windows.size(); i++) {
            for (int r : windows.get(i).logitRows()) {
                System.arraycopy(x, (rowStart[i] + r) * hidden, picked, j++ * hidden, hidden);
            }
        }
        float[] logits = new float[m * c.vocabSize()];
        if (m > 0) {
            matMul.apply(picked, m, hidden, w.lmHead().data(), c.vocabSize(), logits);
        }
        List<float[][]> out = new ArrayList<>();
        List<int[]> drawn = new ArrayList<>();
        j = 0;
        for (ModelStep.Window win : windows) {
            float[][] wl = new float[win.logitRows().length][];
            for (int r = 0; r < wl.length; r++, j++) {
                wl[r] = java.util.Arrays.copyOfRange(logits, j * c.vocabSize(), (j + 1) * c.vocabSize());
            }
            out.add(wl);
            drawn.add(null);
        }
        return new StepOutput(out, drawn, tapOut);
    }

    /** Copies the residual rows of tapped windows after executed layer {@code executed}, if it is a tap layer. */
    private void tap(int[] taps, int executed, float[] x, List<ModelStep.Window> windows, int[] rowStart, List<float[][]> out) {
        int hidden = c.hiddenSize();
        for (int t = 0; t < taps.length; t++) {
            if (taps[t] != executed) {
                continue;
            }
            for (int i = 0; i < windows.size(); i++) {
                float[][] rows = out.get(i);
                for (int r = 0; rows != null && r < rows.length; r++) {
                    System.arraycopy(x, (rowStart[i] + r) * hidden, rows[r], t * hidden, hidden);
                }
            }
        }
    }

    @Override
    public void close() {
        parallel.close();
        kv.close();
    }
}

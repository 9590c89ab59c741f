package dev.spindle.backend.cpu;

import dev.spindle.backend.ForwardPass;
import dev.spindle.backend.ModelStep;
import dev.spindle.backend.StepOutput;
import dev.spindle.backend.TensorParallelLayout;
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
    /** Each tensor-parallel rank's KV store (its KV heads); one at one rank. */
    private final CpuKvStore[] kv;
    private final TensorParallelLayout tp;
    private final KvCapacity capacity;
    private final KvSlots slots;

    /**
     * @param kvBlocks  blocks in the KV pool
     * @param blockSize tokens per block
     */
    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize, int threads, KvSlots slots) {
        this(config, weights, kvBlocks, blockSize, threads, slots, 1);
    }

    /**
     * The pass computed as {@code tensorParallel} ranks would compute it ({@link TensorParallelLayout}): each rank's
     * heads, KV store and MLP columns on their own, its o_proj and down_proj partials (fp32) summed over the ranks
     * in rank order and rounded once. The CPU reference of a tensor-parallel GPU deployment's numerics; at 1 rank
     * the ordinary pass.
     */
    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize, int threads, KvSlots slots, int tensorParallel) {
        this.tp = TensorParallelLayout.of(config, tensorParallel);
        this.c = config;
        this.w = weights;
        this.parallel = new Parallel(threads);
        this.matMul = new MatMul(parallel);
        this.attention = new PagedAttention(parallel);
        this.rotary = new RotaryTable(config.headDim(), config.ropeTheta());
        int slotCount = slots == KvSlots.PER_EXECUTED_LAYER ? config.executedLayers() : config.numLayers();
        this.kv = new CpuKvStore[tp.ranks()];
        for (int r = 0; r < tp.ranks(); r++) {
            kv[r] = new CpuKvStore(kvBlocks, slotCount, blockSize, tp.kvHeads(), config.headDim());
        }
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
        int hidden = c.hiddenSize(), qd = c.qDim(), inter = c.intermediateSize(), half = c.headDim() / 2;
        int[] tokens = new int[n];
        float[] x = new float[n * hidden];        // residual stream (n, H), rows of all windows
        float[] xn = new float[n * hidden];       // normed (n, H)
        int ranks = tp.ranks(), qdr = tp.qDim(), kvdr = tp.kvDim(), ir = tp.intermediate();
        float[] q = new float[n * qdr];           // (n, heads, headDim), one rank's heads
        float[] k = new float[n * kvdr];          // (n, kvHeads, headDim), one rank's
        float[] v = new float[n * kvdr];
        float[] att = new float[n * qdr];
        float[] proj = new float[n * hidden];     // o_proj and down_proj outputs (n, H)
        float[] part = ranks > 1 ? new float[n * hidden] : proj; // a rank's partial of them
        float[] sum = ranks > 1 ? new float[n * hidden] : null;  // the partials' fp32 sum in rank order
        float[] gate = new float[n * ir];         // (n, I), one rank's columns
        float[] up = new float[n * ir];
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
                for (int rank = 0; rank < ranks; rank++) {
                    // column-parallel q|k|v: the rank's rows of each weight
                    matMul.apply(xn, n, hidden, rows(lw.q(), tp.qStart(rank), qdr), qdr, q);
                    matMul.apply(xn, n, hidden, rows(lw.k(), tp.kvStart(rank), kvdr), kvdr, k);
                    matMul.apply(xn, n, hidden, rows(lw.v(), tp.kvStart(rank), kvdr), kvdr, v);
                    CpuKernels.rope(q, n, tp.qHeads(), c.headDim(), cos, sin);
                    CpuKernels.rope(k, n, tp.kvHeads(), c.headDim(), cos, sin);
                    for (int i = 0; i < windows.size(); i++) {
                        ModelStep.Window win = windows.get(i);
                        for (int r = rowStart[i]; r < rowStart[i + 1]; r++) {
                            kv[rank].write(win.table(), slot, win.start() + r - rowStart[i], k, v, r * kvdr);
                        }
                    }
                    for (int i = 0; i < windows.size(); i++) {
                        ModelStep.Window win = windows.get(i);
                        attention.apply(q, rowStart[i], rowStart[i + 1] - rowStart[i], win.start(), tp.qHeads(), tp.kvHeads(),
                                kv[rank], win.table(), slot, att);
                    }
                    // row-parallel o_proj: the rank's columns, a partial over its heads
                    matMul.apply(att, n, qdr, lw.o().data(), qd, tp.qStart(rank), hidden, part, ranks == 1);
                    allReduceStep(sum, part, rank);
                }
                allReduceEnd(sum, proj);
                CpuKernels.addInto(x, proj, n * hidden);
                CpuKernels.rmsNorm(x, n, hidden, lw.postAttnNorm().data(), c.rmsNormEps(), xn);
                for (int rank = 0; rank < ranks; rank++) {
                    matMul.apply(xn, n, hidden, rows(lw.gate(), tp.intermediateStart(rank), ir), ir, gate);
                    matMul.apply(xn, n, hidden, rows(lw.up(), tp.intermediateStart(rank), ir), ir, up);
                    CpuKernels.swiGlu(gate, up, n * ir);
                    matMul.apply(gate, n, ir, lw.down().data(), inter, tp.intermediateStart(rank), hidden, part, ranks == 1);
                    allReduceStep(sum, part, rank);
                }
                allReduceEnd(sum, proj);
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

    /** Rows [first, first + count) of a (rows, hidden) weight: a column-parallel rank's slice. */
    private static java.lang.foreign.MemorySegment rows(dev.spindle.model.Tensor t, int first, int count) {
        long width = t.data().byteSize() / t.dim(0);
        return t.data().asSlice(first * width, count * width);
    }

    /** Adds rank {@code rank}'s partial into the fp32 sum, in rank order (nothing to add at one rank). */
    private void allReduceStep(float[] sum, float[] part, int rank) {
        if (sum == null) {
            return;
        }
        if (rank == 0) {
            System.arraycopy(part, 0, sum, 0, part.length);
        } else {
            for (int i = 0; i < sum.length; i++) {
                sum[i] += part[i];
            }
        }
    }

    /** The all-reduce's result: the sum rounded to bf16 once (at one rank the partial is already in out). */
    private static void allReduceEnd(float[] sum, float[] out) {
        if (sum == null) {
            return;
        }
        for (int i = 0; i < sum.length; i++) {
            out[i] = dev.spindle.model.Bf16.round(sum[i]);
        }
    }

    /** The tensor-parallel layout this pass computes. */
    public TensorParallelLayout tensorParallel() {
        return tp;
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
        for (CpuKvStore s : kv) {
            s.close();
        }
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.backend.DecoderOps;
import dev.spindle.backend.RotaryTable;
import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.model.Bf16;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.step.ModelStep;

import java.util.List;

/**
 * One step's decoder on the CPU: the step's activations and the {@link DecoderOps} over them, run
 * as they are called. Under tensor parallelism each rank's heads, KV store and MLP columns are
 * computed on their own and the row-parallel partials (fp32) are summed in rank order, rounded
 * once: the numerics of a tensor-parallel GPU deployment.
 */
final class CpuDecoderStep implements DecoderOps {
    private final ModelConfig c;
    private final ModelWeights w;
    private final MatMul matMul;
    private final PagedAttention attention;
    private final CpuKvStore[] kv;
    private final TensorParallelLayout tp;
    private final KvSlots slots;
    private final List<ModelStep.Window> windows;
    /** Each window's first row in the step; last, the step's row count n. */
    private final int[] rowStart;
    private final int n;
    private final int[] tokens;  // (n) the rows' token ids
    final float[] x;             // (n, hidden) the residual stream
    private final float[] xn;    // (n, hidden) a norm's output
    private final float[][] q;   // per rank (n, rank's heads, headDim)
    private final float[][] k;   // per rank (n, rank's kvHeads, headDim)
    private final float[][] v;   // per rank (n, rank's kvHeads, headDim)
    private final float[][] att; // per rank (n, rank's heads, headDim)
    private final float[] branch; // (n, hidden) o_proj's or down_proj's output
    private final float[] part;   // (n, hidden) a rank's fp32 partial of branch (branch itself at one rank)
    private final float[] sum;    // (n, hidden) the partials' fp32 sum in rank order; null at one rank
    private final float[][] gate; // per rank (n, rank's intermediate columns); SwiGLU's output in place
    private final float[][] up;   // per rank (n, rank's intermediate columns)
    private final float[] cos, sin; // (n, headDim / 2) each row's rotation at its position
    /** Per window, null or its taps' rows: (rows, taps x hidden). */
    private final List<float[][]> tapOut;

    CpuDecoderStep(ModelConfig c, ModelWeights w, MatMul matMul, PagedAttention attention, CpuKvStore[] kv, TensorParallelLayout tp,
                   KvSlots slots, RotaryTable rotary, List<ModelStep.Window> windows, int[] rowStart, List<float[][]> tapOut) {
        this.c = c;
        this.w = w;
        this.matMul = matMul;
        this.attention = attention;
        this.kv = kv;
        this.tp = tp;
        this.slots = slots;
        this.windows = windows;
        this.rowStart = rowStart;
        this.tapOut = tapOut;
        n = rowStart[windows.size()];
        int hidden = c.hiddenSize(), half = c.headDim() / 2, ranks = tp.ranks();
        tokens = new int[n];
        x = new float[n * hidden];
        xn = new float[n * hidden];
        q = new float[ranks][n * tp.qDim()];
        k = new float[ranks][n * tp.kvDim()];
        v = new float[ranks][n * tp.kvDim()];
        att = new float[ranks][n * tp.qDim()];
        branch = new float[n * hidden];
        part = ranks > 1 ? new float[n * hidden] : branch;
        sum = ranks > 1 ? new float[n * hidden] : null;
        gate = new float[ranks][n * tp.intermediate()];
        up = new float[ranks][n * tp.intermediate()];
        cos = new float[n * half];
        sin = new float[n * half];
        for (int i = 0; i < windows.size(); i++) {
            ModelStep.Window win = windows.get(i);
            int len = win.tokens().length;
            System.arraycopy(win.tokens(), 0, tokens, rowStart[i], len);
            float[] wc = new float[len * half], ws = new float[len * half];
            rotary.fill(win.start(), len, wc, ws);
            System.arraycopy(wc, 0, cos, rowStart[i] * half, wc.length);
            System.arraycopy(ws, 0, sin, rowStart[i] * half, ws.length);
        }
    }

    @Override
    public void embed() {
        CpuKernels.embed(tokens, w.embedding().data(), c.vocabSize(), c.hiddenSize(), x);
    }

    @Override
    public void inputNorm(int layer) {
        CpuKernels.rmsNorm(x, n, c.hiddenSize(), w.layers().get(layer).inputNorm().data(), c.rmsNormEps(), xn);
    }

    @Override
    public void qkvRopeKvWrite(int layer, int executed) {
        LayerWeights lw = w.layers().get(layer);
        int hidden = c.hiddenSize(), qdr = tp.qDim(), kvdr = tp.kvDim();
        int slot = slot(executed);
        for (int rank = 0; rank < tp.ranks(); rank++) {
            // column-parallel q|k|v: the rank's rows of each weight
            matMul.apply(xn, n, lw.q().rows(tp.qStart(rank), qdr), q[rank]);
            matMul.apply(xn, n, lw.k().rows(tp.kvStart(rank), kvdr), k[rank]);
            matMul.apply(xn, n, lw.v().rows(tp.kvStart(rank), kvdr), v[rank]);
            CpuKernels.rope(q[rank], n, tp.qHeads(), c.headDim(), cos, sin);
            CpuKernels.rope(k[rank], n, tp.kvHeads(), c.headDim(), cos, sin);
            for (int i = 0; i < windows.size(); i++) {
                ModelStep.Window win = windows.get(i);
                for (int r = rowStart[i]; r < rowStart[i + 1]; r++) {
                    kv[rank].write(win.table(), slot, win.start() + r - rowStart[i], k[rank], v[rank], r * kvdr);
                }
            }
        }
    }

    @Override
    public void attention(int executed) {
        int slot = slot(executed);
        for (int rank = 0; rank < tp.ranks(); rank++) {
            for (int i = 0; i < windows.size(); i++) {
                ModelStep.Window win = windows.get(i);
                attention.apply(q[rank], rowStart[i], rowStart[i + 1] - rowStart[i], win.start(), tp.qHeads(), tp.kvHeads(), kv[rank],
                        win.table(), slot, att[rank]);
            }
        }
    }

    @Override
    public void outProj(int layer) {
        Matrix o = w.layers().get(layer).o();
        for (int rank = 0; rank < tp.ranks(); rank++) {
            // row-parallel o_proj: the rank's columns, a partial over its heads
            matMul.applyColumns(att[rank], n, o, tp.qStart(rank), tp.qDim(), part, tp.ranks() == 1);
            allReduceStep(rank);
        }
        allReduceEnd();
    }

    @Override
    public void addResidual() {
        CpuKernels.addInto(x, branch, n * c.hiddenSize());
    }

    @Override
    public void postAttentionNorm(int layer) {
        CpuKernels.rmsNorm(x, n, c.hiddenSize(), w.layers().get(layer).postAttnNorm().data(), c.rmsNormEps(), xn);
    }

    @Override
    public void gateUpSwiglu(int layer) {
        LayerWeights lw = w.layers().get(layer);
        int ir = tp.intermediate();
        for (int rank = 0; rank < tp.ranks(); rank++) {
            matMul.apply(xn, n, lw.gate().rows(tp.intermediateStart(rank), ir), gate[rank]);
            matMul.apply(xn, n, lw.up().rows(tp.intermediateStart(rank), ir), up[rank]);
            CpuKernels.swiGlu(gate[rank], up[rank], n * ir);
        }
    }

    @Override
    public void downProj(int layer) {
        Matrix down = w.layers().get(layer).down();
        for (int rank = 0; rank < tp.ranks(); rank++) {
            matMul.applyColumns(gate[rank], n, down, tp.intermediateStart(rank), tp.intermediate(), part, tp.ranks() == 1);
            allReduceStep(rank);
        }
        allReduceEnd();
    }

    @Override
    public void tap(int index) {
        int hidden = c.hiddenSize();
        for (int i = 0; i < windows.size(); i++) {
            float[][] rows = tapOut.get(i);
            for (int r = 0; rows != null && r < rows.length; r++) {
                System.arraycopy(x, (rowStart[i] + r) * hidden, rows[r], index * hidden, hidden);
            }
        }
    }

    @Override
    public void finalNorm() {
        CpuKernels.rmsNorm(x, n, c.hiddenSize(), w.finalNorm().data(), c.rmsNormEps(), x);
    }

    private int slot(int executed) {
        return slots.slot(executed % c.numLayers(), executed / c.numLayers(), c.numLayers());
    }

    /** Adds rank {@code rank}'s partial into the fp32 sum, in rank order (nothing to add at one rank). */
    private void allReduceStep(int rank) {
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

    /** The all-reduce's result: the sum rounded to bf16 once (at one rank the partial is already in branch). */
    private void allReduceEnd() {
        if (sum == null) {
            return;
        }
        for (int i = 0; i < sum.length; i++) {
            branch[i] = Bf16.round(sum[i]);
        }
    }
}

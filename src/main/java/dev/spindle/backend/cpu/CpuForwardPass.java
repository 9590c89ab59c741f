package dev.spindle.backend.cpu;

import dev.spindle.backend.DecoderProgram;
import dev.spindle.backend.RotaryTable;
import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.KvCapacity;
import dev.spindle.step.KvDtype;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The reference forward pass on the CPU, for stock and looped llama, in HF's bf16 numerics:
 * {@link DecoderProgram} over {@link CpuDecoderStep}'s ops, then the head on the rows whose
 * logits are wanted.
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
        this(config, weights, kvBlocks, blockSize, threads, slots, tensorParallel, KvDtype.BF16);
    }

    /** As above, the KV cache stored as {@code kvDtype} (quantized when written; every attention read decodes the stored form). */
    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize, int threads, KvSlots slots, int tensorParallel,
                          KvDtype kvDtype) {
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
            kv[r] = new CpuKvStore(kvBlocks, slotCount, blockSize, tp.kvHeads(), config.headDim(), kvDtype);
        }
        this.capacity = new KvCapacity(kvBlocks, blockSize, kv[0].dtype());
        this.slots = slots;
    }

    public CpuForwardPass(ModelConfig config, ModelWeights weights, int kvBlocks, int blockSize) {
        this(config, weights, kvBlocks, blockSize, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER);
    }

    /** The model's weights (a draft head shares its embedding and output head). */
    public ModelWeights weights() {
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
        int hidden = c.hiddenSize();
        int[] taps = step.tapLayers();
        List<float[][]> tapOut = new ArrayList<>();
        for (ModelStep.Window win : windows) {
            tapOut.add(win.tap() ? new float[win.tokens().length][taps.length * hidden] : null);
        }
        CpuDecoderStep decoder = new CpuDecoderStep(c, w, matMul, attention, kv, tp, slots, rotary, windows, rowStart, tapOut);
        DecoderProgram.run(c, taps, decoder);
        float[] x = decoder.x;
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
            matMul.apply(picked, m, w.lmHead(), logits);
        }
        List<float[][]> out = new ArrayList<>();
        List<int[]> drawn = new ArrayList<>();
        j = 0;
        for (ModelStep.Window win : windows) {
            float[][] wl = new float[win.logitRows().length][];
            for (int r = 0; r < wl.length; r++, j++) {
                wl[r] = Arrays.copyOfRange(logits, j * c.vocabSize(), (j + 1) * c.vocabSize());
            }
            out.add(wl);
            drawn.add(null);
        }
        return new StepOutput(out, drawn, tapOut);
    }

    /** The tensor-parallel layout this pass computes. */
    public TensorParallelLayout tensorParallel() {
        return tp;
    }

    @Override
    public void close() {
        parallel.close();
        for (CpuKvStore s : kv) {
            s.close();
        }
    }
}

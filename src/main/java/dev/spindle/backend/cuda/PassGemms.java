package dev.spindle.backend.cuda;

import dev.spindle.model.ModelConfig;

import java.util.ArrayList;
import java.util.List;

/**
 * What a pass settles before its first step: that the CUDA kernels take its shapes, every GEMM's algorithm (pinned per
 * weight shape, from the cache or by timing candidates: never chosen in the middle of a step) and the few-row kernel's
 * tensor maps of every weight it may read and every buffer the linear layers read.
 */
final class PassGemms {
    private PassGemms() {
    }

    /** Refuses shapes the kernels do not take, naming the field. */
    static void checkShapes(ModelConfig c) {
        if (!AttentionKernels.supportsHeadDim(c.headDim())) {
            throw new CudaException("head_dim " + c.headDim() + " is not supported by the CUDA attention kernel (16, 32, 64 or 128)");
        }
        if (c.hiddenSize() % 8 != 0) {
            throw new CudaException("hidden_size " + c.hiddenSize() + " is not a multiple of 8, which the CUDA norm kernels need");
        }
        if (c.numHeads() / c.numKvHeads() > 16) {
            throw new CudaException("more than 16 query heads per KV head are not supported by the CUDA attention kernel (one MMA tile per KV head)");
        }
    }

    /**
     * Chooses the GEMMs of one layer's shapes (all layers share them) and the head's.
     *
     * @param partials whether o_proj and down_proj write a tensor-parallel rank's fp32 partials
     */
    static void choose(Linear linear, PairedLaunches pairing, CudaWeights w, boolean partials, boolean head) {
        CudaWeights.Layer layer0 = w.layer(0);
        linear.prepare(layer0.qkv());
        linear.prepare(layer0.gateUp());
        pairing.prepare(layer0);
        if (!partials) {
            linear.prepare(layer0.o());
            linear.prepare(layer0.down());
        } else {
            linear.preparePartial(layer0.o());
            linear.preparePartial(layer0.down());
        }
        if (head) {
            linear.prepare(w.lmHead());
        }
    }

    /** The few-row kernel's tensor maps of every layer's weights and of the step buffers the linear layers read (n rows). */
    static void mapTensors(Linear linear, PairedLaunches pairing, CudaWeights w, StepBuffers b, ModelConfig c, int n, boolean head) {
        for (int l = 0; l < c.numLayers(); l++) {
            CudaWeights.Layer layer = w.layer(l);
            linear.weight(layer.qkv());
            linear.weight(layer.gateUp());
            pairing.weights(layer);
            if (b.partial == null) {
                linear.weight(layer.o());
                linear.weight(layer.down());
            }
        }
        linear.input(b.xn, n, c.hiddenSize());
        if (b.partial == null) {
            linear.input(b.att, n, c.qDim());
            linear.input(b.act, n, c.intermediateSize());
        }
        if (head) {
            linear.weight(w.lmHead());
            linear.input(b.picked, b.logitRowsMax, c.hiddenSize());
        }
    }

    /** One line per weight shape: the GEMM algorithms pinned, where linear_rows runs, and their timings; then the pairing. */
    static List<String> choices(Linear linear, PairedLaunches pairing) {
        List<String> all = new ArrayList<>(linear.choices());
        all.addAll(pairing.paired.choices());
        if (pairing.choice() != null) {
            all.add(pairing.choice());
        }
        return all;
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.Tensor;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A DFlash / DFlash2 head's weights on the device, by checkpoint name: uploaded from the host tensors, or (for the cost
 * benchmark) made on the device with seeded random values. Each layer's gate_proj and up_proj lie in one allocation as
 * {@code mlp.gate_up.weight} ([2 * intermediate, hidden] bf16: gate's rows, then up's), one GEMM for both. The
 * selector's codebooks go up too (DFlash2's greedy walk runs on the device) and stay on the host for the host walk.
 */
final class DraftHeadWeights {
    private final CudaDriver cuda;
    private final DraftHeadConfig c;
    private final Map<String, Long> byName = new HashMap<>();
    private final List<Long> allocations = new ArrayList<>();

    /** The head's checkpoint tensors, uploaded. */
    static DraftHeadWeights upload(CudaDriver cuda, DraftHeadConfig config, Map<String, Tensor> weights) {
        DraftHeadWeights w = new DraftHeadWeights(cuda, config);
        for (Map.Entry<String, Tensor> e : weights.entrySet()) {
            String name = e.getKey();
            if (name.endsWith("mlp.up_proj.weight")) {
                continue; // uploaded after its gate_proj
            }
            long bytes = e.getValue().data().byteSize();
            if (name.endsWith("mlp.gate_proj.weight")) {
                Tensor up = weights.get(name.replace("gate_proj", "up_proj"));
                long p = w.alloc(2 * bytes);
                cuda.copyToDevice(p, e.getValue().data());
                cuda.copyToDeviceAsync(p + bytes, up.data(), up.data().byteSize());
                cuda.sync();
                w.byName.put(name.replace("gate_proj", "gate_up"), p);
                continue;
            }
            long p = w.alloc(bytes);
            cuda.copyToDevice(p, e.getValue().data());
            w.byName.put(name, p);
        }
        return w;
    }

    /**
     * Random weights of {@code deviceShapes} made on the device (seeded; norms near 1, projections scaled by
     * 1 / sqrt(fan-in)), and {@code hostTensors} (the codebooks) zeroed on the device.
     */
    static DraftHeadWeights dummy(CudaDriver cuda, CudaKernels k, DraftHeadConfig config, Map<String, long[]> deviceShapes,
                                  Map<String, Tensor> hostTensors, long seed) {
        DraftHeadWeights w = new DraftHeadWeights(cuda, config);
        for (Map.Entry<String, long[]> e : deviceShapes.entrySet()) {
            if (e.getKey().endsWith("mlp.up_proj.weight")) {
                continue; // made with its gate_proj
            }
            long[] shape = e.getValue();
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            boolean gate = e.getKey().endsWith("mlp.gate_proj.weight");
            long p = w.alloc(2 * n * (gate ? 2 : 1));
            boolean norm = shape.length == 1;
            k.fillDummy(p, n * (gate ? 2 : 1), seed + w.byName.size(), norm ? 1f : 0f, norm ? 0.05f : (float) (1 / Math.sqrt(shape[shape.length - 1])));
            w.byName.put(gate ? e.getKey().replace("gate_proj", "gate_up") : e.getKey(), p);
        }
        for (Map.Entry<String, Tensor> e : hostTensors.entrySet()) {
            long p = w.alloc(e.getValue().data().byteSize());
            cuda.memsetZero(p, e.getValue().data().byteSize());
            w.byName.put(e.getKey(), p);
        }
        return w;
    }

    private DraftHeadWeights(CudaDriver cuda, DraftHeadConfig config) {
        this.cuda = cuda;
        this.c = config;
    }

    private long alloc(long bytes) {
        long p = cuda.alloc(Math.max(bytes, 16));
        allocations.add(p);
        return p;
    }

    /** The device address of a tensor by its checkpoint name (gate and up: {@code layers.N.mlp.gate_up.weight}). */
    long get(String name) {
        Long p = byName.get(name);
        if (p == null) {
            throw new IllegalStateException("the draft head has no tensor " + name + " on the device");
        }
        return p;
    }

    /** The GEMM plans and tensor maps of every projection, for a head reading {@code taps} target layers. */
    void prepare(Linear linear, int taps) {
        int h = c.hidden(), kw = c.kvHeads() * c.headDim(), qd = c.heads() * c.headDim(), in = c.intermediate();
        boolean two = c.kind() == DraftHeadConfig.Kind.DFLASH2;
        int dynW = two ? 2 * c.convKernel() * (h / c.convGroup()) : 1;
        prepare(linear, taps * h, "fc.weight", h);
        for (int l = 0; l < c.layers(); l++) {
            String p = "layers." + l + ".";
            prepare(linear, h, p + "self_attn.q_proj.weight", qd);
            prepare(linear, h, p + "self_attn.k_proj.weight", kw);
            prepare(linear, h, p + "self_attn.v_proj.weight", kw);
            prepare(linear, qd, p + "self_attn.o_proj.weight", h);
            prepare(linear, h, p + "mlp.gate_up.weight", 2 * in);
            prepare(linear, in, p + "mlp.down_proj.weight", h);
            if (two) {
                prepare(linear, h, p + "attention_conv.kernel_projection.weight", dynW);
                prepare(linear, h, p + "mlp_conv.kernel_projection.weight", dynW);
            }
        }
        if (two) {
            prepare(linear, h, "candidate_selector.hidden_projection.weight", c.selectorRank());
        }
    }

    private void prepare(Linear linear, int kIn, String weight, int nOut) {
        long w = get(weight);
        linear.prepare(kIn, w, nOut);
        linear.weight(w, kIn, nOut);
    }

    /** Frees the weights (and the GEMMs' cached tensor maps of them). */
    void free(Linear linear) {
        allocations.forEach(linear::forget);
        allocations.forEach(cuda::free);
        allocations.clear();
    }
}

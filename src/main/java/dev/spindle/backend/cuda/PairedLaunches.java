package dev.spindle.backend.cuda;

import dev.spindle.model.ModelConfig;

/**
 * Where a pass launches a GEMM and the elementwise work after it as one paired launch ({@link PairedLinear}): q|k|v with
 * rope_kv_write, gate|up with SwiGLU. Only for shapes the paired kernels take (intermediate size a multiple of 32, head
 * dim 64 or 128), at the step sizes PairedLinear chose per shape, and while on: PairingChoice switches them off at open
 * where whole decode steps are not faster with them; tensor parallelism switches them off. Both ways compute the same bits.
 */
final class PairedLaunches {
    final PairedLinear paired;
    private final ModelConfig c;
    private final int blockSize;
    /** Whether this pass's shapes have paired kernels. */
    final boolean shapes;
    private boolean on = true;
    /** What PairingChoice (or its absence) decided, for the GEMM choices; null until decided. */
    private String choice;

    /**
     * @param layer0 a layer of the weights (all layers share their formats)
     * @param kv8    whether the KV pool is fp8 (the paired rope_kv_write epilogue writes bf16 K and V: no pairing)
     */
    PairedLaunches(PairedLinear paired, ModelConfig c, int blockSize, CudaWeights.Layer layer0, boolean kv8) {
        this.paired = paired;
        this.c = c;
        this.blockSize = blockSize;
        this.shapes = PairedEpilogue.Swiglu.takes(c.intermediateSize()) && PairedEpilogue.RopeKvWrite.takes(c.headDim())
                && layer0.qkv() instanceof DeviceMatrix.Bf16 && layer0.gateUp() instanceof DeviceMatrix.Bf16 && !kv8;
    }

    /** Chooses the paired kernels' variants for this pass's shapes (bf16 weights), now rather than in a step. */
    void prepare(CudaWeights.Layer layer0) {
        if (shapes) {
            paired.prepare(swiglu(), c.hiddenSize(), bf16(layer0.gateUp()));
            paired.prepare(ropeShape(), c.hiddenSize(), bf16(layer0.qkv()));
        }
    }

    /** Sets up what the paired kernels read of a layer's q|k|v and gate|up. */
    void weights(CudaWeights.Layer layer) {
        if (shapes) {
            paired.weight(swiglu(), bf16(layer.gateUp()), c.hiddenSize());
            paired.weight(ropeShape(), bf16(layer.qkv()), c.hiddenSize());
        }
    }

    /** Runs paired variant v for both epilogues in steps of up to 8 rows (tests of the paired launches in whole steps). */
    void use(LinearRowsVariant v, CudaWeights w) {
        paired.use(swiglu(), c.hiddenSize(), v);
        paired.use(ropeShape(), c.hiddenSize(), v);
        for (int l = 0; l < c.numLayers(); l++) {
            weights(w.layer(l));
        }
    }

    /** The paired launch of {@code e} over n rows of x through weight w ({@link PairedLinear#apply}). */
    void apply(PairedEpilogue e, long x, int n, DeviceMatrix w, long out, long scratch) {
        paired.apply(e, x, n, c.hiddenSize(), bf16(w), out, scratch);
    }

    /** The paired kernels read bf16 weights only ({@link #shapes} is false for any other format). */
    private static long bf16(DeviceMatrix w) {
        return switch (w) {
            case DeviceMatrix.Bf16 b -> b.data();
            default -> throw new IllegalStateException("no paired kernels read " + w.getClass().getSimpleName() + " weights (shapes is false for them)");
        };
    }

    /** The paired SwiGLU of this pass's gate|up. */
    PairedEpilogue.Swiglu swiglu() {
        return new PairedEpilogue.Swiglu(c.intermediateSize());
    }

    /** The sizes of this pass's paired rope_kv_write (without a step's pointers: {@link #rope}). */
    PairedEpilogue.RopeKvWrite ropeShape() {
        return new PairedEpilogue.RopeKvWrite(0, 0, 0, c.numHeads(), c.numKvHeads(), c.headDim(), 0, 0, blockSize);
    }

    /** rope_kv_write of a step's rows (positions and slot map at their device addresses) into one KV slot's pool. */
    PairedEpilogue.RopeKvWrite rope(long cos, long sin, long positions, long kvSlot, long slotMap) {
        return new PairedEpilogue.RopeKvWrite(cos, sin, positions, c.numHeads(), c.numKvHeads(), c.headDim(), kvSlot, slotMap, blockSize);
    }

    /** Whether n rows run q|k|v and rope_kv_write ({@code rope}), or gate|up and SwiGLU, as one paired launch. */
    boolean pairs(boolean rope, int n) {
        return shapes && on && paired.pairs(rope ? ropeShape() : swiglu(), c.hiddenSize(), n);
    }

    /** Whether PairedLinear planned a paired launch for single-row steps of either epilogue. */
    boolean planned() {
        return shapes && (paired.pairs(ropeShape(), c.hiddenSize(), 1) || paired.pairs(swiglu(), c.hiddenSize(), 1));
    }

    boolean on() {
        return on;
    }

    void on(boolean on) {
        this.on = on;
    }

    /** Switches them off for good, saying why. */
    void off(String why) {
        on = false;
        choice = "paired launches: " + why;
    }

    void decided(String choice) {
        this.choice = choice;
    }

    /** What was decided, or null. */
    String choice() {
        return choice;
    }
}

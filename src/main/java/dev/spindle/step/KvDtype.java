package dev.spindle.step;

/**
 * How a backend's KV store holds K and V. bf16 is the default and exact: the model computes K and V
 * in bf16 (HF's numerics), so storing them in bf16 loses nothing. A quantized cache is a new value
 * here, its layout in each backend's store and its attention kernels; it is opt-in and disclosed with
 * its KL against the bf16 release.
 */
public enum KvDtype {
    BF16("bf16", 2);

    /** The name the start log and /v1/models give. */
    public final String label;
    /** Bytes of one stored value (per element of a head vector). */
    public final int bytes;

    KvDtype(String label, int bytes) {
        this.label = label;
        this.bytes = bytes;
    }
}

package dev.spindle.backend.cuda;

import java.util.Locale;

/**
 * Which of the CUDA backend's kernels run ({@code --cuda-kernels}, {@code spindle.cuda-kernels}).
 * <ul>
 * <li>{@link #FULL}: the fatbin's code built for this GPU, with Hopper's kernels where it is one (the wgmma and
 * warp-specialised prefill attention, the tensor-memory-copy {@code linear_rows} GEMVs, their paired twins, the fp8 mma.sync
 * variants).</li>
 * <li>{@link #PORTABLE}: only the kernels every supported GPU runs, from the sm_80 PTX that the driver compiles for this GPU
 * ({@code spindle-portable.fatbin}): no wgmma, no tensor-memory copies, no {@code linear_rows}, no programmatic dependent
 * launch, fp8 decoded without sm_89's converter. On an H100 it runs the code an A100, L4, RTX 4090 or RTX 5090 runs
 * (each of those runs its own compiled cubin of the same source), so the suite and the invariants are checked there.</li>
 * </ul>
 */
public enum KernelSet {
    FULL("full", "/cuda/spindle.fatbin"),
    PORTABLE("portable", "/cuda/spindle-portable.fatbin");

    /** The name {@code --cuda-kernels} takes. */
    public final String label;
    /** The fatbin resource the kernels load from. */
    final String resource;

    KernelSet(String label, String resource) {
        this.label = label;
        this.resource = resource;
    }

    /** {@code full} or {@code portable}. */
    public static KernelSet parse(String s) {
        String v = s == null ? "full" : s.trim().toLowerCase(Locale.ROOT);
        for (KernelSet k : values()) {
            if (k.label.equals(v)) {
                return k;
            }
        }
        throw new IllegalArgumentException("cuda kernels: expected full or portable, got \"" + s + "\"");
    }
}

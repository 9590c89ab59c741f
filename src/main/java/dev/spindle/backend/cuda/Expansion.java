package dev.spindle.backend.cuda;

/**
 * {@link Linear}'s expansion buffer: where a weight read as bf16 values (fp8 for steps of more rows than its few-row kernels
 * take; ggml blocks, MLX affine and NVFP4 always) is expanded for cuBLASLt. As large as the largest such weight prepared;
 * grows only while weights are prepared, before any step is captured (a captured step holds its address).
 */
final class Expansion implements AutoCloseable {
    private final CudaDriver cuda;
    private long address, bytes;

    Expansion(CudaDriver cuda) {
        this.cuda = cuda;
    }

    /** At least {@code need} bytes from now on. */
    void grow(long need) {
        if (need > bytes) {
            if (address != 0) {
                cuda.sync();
                cuda.free(address);
            }
            address = cuda.alloc(need);
            bytes = need;
        }
    }

    /** Each projection of e expanded into its rows of the buffer; in stream order. */
    void expand(ExpandKernels kernels, DeviceMatrix.Expanded e) {
        if (e.expandedBytes() > bytes) {
            throw new IllegalStateException(e.parts().getFirst().format() + " " + e.rows() + " x " + e.cols() + " expanded before it was prepared");
        }
        int row0 = 0;
        for (ExpandKernels.Part p : e.parts()) {
            kernels.expand(p, address, row0);
            row0 += p.rows();
        }
    }

    /**
     * An expanded format's weight prepared: the buffer sized for it, cuBLASLt's algorithms for its shape pinned now (never in
     * the middle of a step); returns the line {@link Linear#choices} gives it.
     */
    String prepare(ExpandKernels kernels, CublasLt lt, DeviceMatrix.Expanded e) {
        grow(e.expandedBytes());
        long x = cuda.alloc(2L * e.cols()), y = cuda.alloc(2L * e.rows());
        try {
            cuda.memsetZero(x, 2L * e.cols());
            expand(kernels, e);
            lt.linear(x, 1, e.cols(), address, e.rows(), y);
            cuda.sync();
        } finally {
            cuda.free(x);
            cuda.free(y);
        }
        return String.format(java.util.Locale.ROOT, "%s %d x %d: expanded to bf16 a step (expand.cu), then cuBLASLt", e.parts().getFirst().format(),
                e.rows(), e.cols());
    }

    /** The buffer's device address (0 before any weight is prepared). */
    long address() {
        return address;
    }

    @Override
    public void close() {
        if (address != 0) {
            cuda.free(address);
            address = 0;
            bytes = 0;
        }
    }
}

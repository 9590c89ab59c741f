package dev.spindle.backend.cuda;

import dev.spindle.backend.ModelStep.Draw;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Draws tokens from logits rows that stay on the device (the {@code sample} kernel): each row's
 * parameters go up as five doubles, its token id comes back; the logits never cross PCIe. Rows are
 * drawn in groups of at most {@link #GROUP}, the size of the kernel's fp32 scratch.
 */
final class DeviceDraws implements AutoCloseable {
    /** Rows per kernel launch: its scratch is GROUP x vocab fp32. */
    static final int GROUP = 128;

    private final CudaDriver cuda;
    private final CudaKernels k;
    private final int vocab;
    private final long params, scratch, ids;
    private final MemorySegment paramsHost, idsHost;

    DeviceDraws(CudaKernels kernels, int vocab) {
        this.k = kernels;
        this.cuda = kernels.driver();
        this.vocab = vocab;
        params = cuda.alloc(GROUP * 5L * 8);
        scratch = cuda.alloc((long) GROUP * vocab * 4);
        ids = cuda.alloc(GROUP * 4L);
        paramsHost = cuda.allocHost(GROUP * 5L * 8);
        idsHost = cuda.allocHost(GROUP * 4L);
    }

    /**
     * Draws rows [0, m) of {@code logits} (bf16, m x vocab) whose entry in {@code draws} (from
     * {@code first} on) is non-null, with that row's uniform from {@code us}, writing their ids into
     * {@code out} at the same index.
     */
    void draw(long logits, int m, Draw[] draws, double[] us, int first, int[] out) {
        for (int g = 0; g < m; g += GROUP) {
            int n = Math.min(GROUP, m - g);
            boolean any = false;
            for (int r = 0; r < n; r++) {
                Draw d = draws[first + g + r];
                any |= d != null;
                long o = r * 5L * 8;
                paramsHost.set(ValueLayout.JAVA_DOUBLE, o, d == null ? -1 : d.temperature());
                paramsHost.set(ValueLayout.JAVA_DOUBLE, o + 8, d == null ? 0 : d.topK());
                paramsHost.set(ValueLayout.JAVA_DOUBLE, o + 16, d == null ? 1 : d.topP());
                paramsHost.set(ValueLayout.JAVA_DOUBLE, o + 24, d == null ? 0 : d.minP());
                paramsHost.set(ValueLayout.JAVA_DOUBLE, o + 32, d == null ? 0 : us[first + g + r]);
            }
            if (!any) {
                continue;
            }
            cuda.copyToDeviceAsync(params, paramsHost, n * 5L * 8);
            k.sample(logits + (long) g * vocab * 2, n, vocab, params, scratch, ids);
            cuda.copyToHost(idsHost.asSlice(0, n * 4L), ids);
            for (int r = 0; r < n; r++) {
                if (draws[first + g + r] != null) {
                    out[first + g + r] = idsHost.getAtIndex(ValueLayout.JAVA_INT, r);
                }
            }
        }
    }

    @Override
    public void close() {
        cuda.free(params);
        cuda.free(scratch);
        cuda.free(ids);
        cuda.freeHost(paramsHost);
        cuda.freeHost(idsHost);
    }
}

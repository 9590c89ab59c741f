package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep.Draw;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Draws tokens from logits rows that stay on the device (the {@code sample} kernel): each row's
 * parameters go up as five doubles ({@link #upload}), its token id is written on the device ({@link #sample}),
 * where the next step may be fed from it or the host reads it; the logits never cross PCIe. Rows are
 * drawn in groups of at most {@link #GROUP}, the size of the kernel's fp32 scratch.
 */
final class DeviceDraws implements AutoCloseable {
    /** Rows per kernel launch: its scratch is GROUP x vocab fp32. */
    static final int GROUP = 128;

    private final CudaDriver cuda;
    private final CudaKernels k;
    private final int vocab;
    private final long scratch;
    /** A step's rows at most ({@link #upload}). */
    private final int stepRows;
    /**
     * Two slots of a whole step's parameters (device, pinned host) for steps started ahead ({@link #upload}): a step's copy
     * may still wait in the stream while the next step writes the other slot; each slot's last copy is recorded.
     */
    private final long[] stepParams = new long[2];
    private final MemorySegment[] stepParamsHost = new MemorySegment[2], stepUploaded = new MemorySegment[2];

    DeviceDraws(CudaKernels kernels, int vocab, int stepRows) {
        this.k = kernels;
        this.cuda = kernels.driver();
        this.vocab = vocab;
        this.stepRows = stepRows;
        scratch = cuda.alloc((long) GROUP * vocab * 4);
        for (int i = 0; i < 2; i++) {
            stepParams[i] = cuda.alloc(stepRows * 5L * 8);
            stepParamsHost[i] = cuda.allocHost(stepRows * 5L * 8);
            stepUploaded[i] = cuda.createEvent();
        }
    }

    /** Writes row r's five parameters (T < 0: not drawn) at {@code o} of a host parameter buffer. */
    private static void put(MemorySegment host, long o, Draw d, double u) {
        host.set(ValueLayout.JAVA_DOUBLE, o, d == null ? -1 : d.temperature());
        host.set(ValueLayout.JAVA_DOUBLE, o + 8, d == null ? 0 : d.topK());
        host.set(ValueLayout.JAVA_DOUBLE, o + 16, d == null ? 1 : d.topP());
        host.set(ValueLayout.JAVA_DOUBLE, o + 24, d == null ? 0 : d.minP());
        host.set(ValueLayout.JAVA_DOUBLE, o + 32, d == null ? 0 : u);
    }

    /**
     * Sends the draws of a step's {@code rows} logit rows (their parameters, null for a row not drawn) into {@code slot}
     * without waiting: the step's {@link #sample} calls read them. The slot's previous copy is waited for first.
     */
    void upload(Draw[] draws, double[] us, int rows, int slot) {
        if (rows > stepRows) {
            throw new IllegalArgumentException(rows + " logit rows exceed the " + stepRows + " a step's draws hold");
        }
        cuda.syncEvent(stepUploaded[slot]);
        for (int r = 0; r < rows; r++) {
            put(stepParamsHost[slot], r * 5L * 8, draws[r], us[r]);
        }
        cuda.copyToDeviceAsync(stepParams[slot], stepParamsHost[slot], rows * 5L * 8);
        cuda.record(stepUploaded[slot]);
    }

    /**
     * Draws the step's logit rows [first, first + m), whose logits are {@code logits} (m x vocab), by the parameters
     * {@link #upload} sent into {@code slot}, writing row j's id at {@code out + 4 * j}; asynchronous.
     */
    void sample(long logits, int m, int first, int slot, long out) {
        for (int g = 0; g < m; g += GROUP) {
            int n = Math.min(GROUP, m - g);
            k.sample(logits + (long) g * vocab * 2, n, vocab, stepParams[slot] + (first + g) * 5L * 8, scratch, out + (first + g) * 4L);
        }
    }

    @Override
    public void close() {
        cuda.free(scratch);
        for (int i = 0; i < 2; i++) {
            cuda.free(stepParams[i]);
            cuda.freeHost(stepParamsHost[i]);
            cuda.destroyEvent(stepUploaded[i]);
        }
    }
}

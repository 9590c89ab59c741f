package dev.spindle.backend.cuda;

import dev.spindle.model.Exl3Matrix;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * {@link Linear}'s EXL3 layers: each projection of a {@link DeviceMatrix.Exl3} stack through {@link Exl3Kernels#linear}
 * into its columns of the output, {@link #CHUNK} rows at a time, over one fp32 scratch sized by {@link #prepare} (before any
 * step is captured). Every row's values are its own (the kernels never mix rows), so a decode row equals a window's and a
 * row batched equals it alone.
 */
final class Exl3Linear {
    /** Rows transformed at a time (the scratch holds this many rows' padded inputs and outputs in fp32). */
    static final int CHUNK = 64;
    private final Exl3Kernels kernels;
    private final CudaDriver cuda;
    private final List<String> choices = new ArrayList<>();
    private long in, inBytes, out, outBytes;

    Exl3Linear(Exl3Kernels kernels, CudaDriver cuda) {
        this.kernels = kernels;
        this.cuda = cuda;
    }

    /** y (n, e.rows()) = x (n, e.cols()) @ W^T, bf16; in stream order. */
    void apply(long x, int n, DeviceMatrix.Exl3 e, long y) {
        if (in == 0 || 4L * CHUNK * Exl3Matrix.pad(e.cols()) > inBytes) {
            throw new IllegalStateException("EXL3 layer " + e.rows() + " x " + e.cols() + " used before prepare()");
        }
        for (int r0 = 0; r0 < n; r0 += CHUNK) {
            int rows = Math.min(CHUNK, n - r0), off = 0;
            for (Exl3Kernels.Weights p : e.parts()) {
                kernels.linear(x + 2L * r0 * e.cols(), e.cols(), rows, p, 0, e.cols(), y + 2L * ((long) r0 * e.rows() + off), e.rows(), in, out);
                off += p.rows();
            }
        }
    }

    /** Sizes the scratch for this weight and records its line for {@link #choices}. */
    void prepare(DeviceMatrix.Exl3 e) {
        long needIn = 4L * CHUNK * Exl3Matrix.pad(e.cols());
        long needOut = 4L * CHUNK * e.parts().stream().mapToInt(p -> Exl3Matrix.pad(p.rows())).max().orElseThrow();
        if (needIn > inBytes) {
            free(in);
            in = cuda.alloc(needIn);
            inBytes = needIn;
        }
        if (needOut > outBytes) {
            free(out);
            out = cuda.alloc(needOut);
            outBytes = needOut;
        }
        String line = String.format(Locale.ROOT, "exl3 %d x %d: exl3_had_in, exl3_gemv, exl3_had_out a projection (%s)", e.rows(), e.cols(),
                e.parts().stream().map(p -> p.rows() + " rows at " + p.bits() + " bits").collect(Collectors.joining(", ")));
        if (!choices.contains(line)) {
            choices.add(line);
        }
    }

    List<String> choices() {
        return choices;
    }

    private void free(long p) {
        if (p != 0) {
            cuda.free(p);
        }
    }

    void close() {
        free(in);
        free(out);
        in = out = inBytes = outBytes = 0;
    }
}

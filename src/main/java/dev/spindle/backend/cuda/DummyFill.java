package dev.spindle.backend.cuda;

import dev.spindle.model.Exl3Codebook;
import dev.spindle.model.Exl3Matrix;
import dev.spindle.model.LoadListener;
import dev.spindle.model.Quantization;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Seeded weights generated on the device for {@link CudaWeights#dummy}: bf16 values; linear layers quantized through a bf16
 * scratch (freed on close) where the format says, or EXL3 (trellises of fill_dummy's bf16 patterns, not uniform bits: every
 * 16-bit state is a codebook value and the decoding's cost does not depend on which; su ±1, sv ±1/sqrt(in)).
 */
final class DummyFill implements AutoCloseable {
    private final CudaWeights out;
    private final CudaKernels k;
    private final LoadListener listener;
    private final long total;
    private final DummyFormat format;
    private final long scratch;
    private long seed, done;

    DummyFill(CudaWeights out, CudaKernels k, long seed, long total, LoadListener listener, DummyFormat format, long scratchElements) {
        this.out = out;
        this.k = k;
        this.seed = seed;
        this.total = total;
        this.listener = listener;
        this.format = format;
        this.scratch = scratchElements == 0 ? 0 : out.cuda.alloc(2 * scratchElements);
    }

    long fill(long rows, long cols, float center, float scale) {
        return fillAt(out.alloc(rows * cols * 2), rows * cols, center, scale);
    }

    private long fillAt(long p, long n, float center, float scale) {
        k.fillDummy(p, n, (seed++) * 0x9E3779B97F4A7C15L, center, scale);
        done += n * 2;
        listener.loaded("dummy", done, total);
        return p;
    }

    long norm(long width) {
        return fill(1, width, 1f, 0.1f);
    }

    /** A linear layer of inDim inputs: the projections of outDims outputs stacked (q|k|v, gate|up), in the format. */
    DeviceMatrix linear(int inDim, int... outDims) {
        int outDim = java.util.Arrays.stream(outDims).sum();
        if (format.exl3Bits() > 0) {
            List<Exl3Kernels.Weights> parts = new ArrayList<>();
            for (int n : outDims) {
                parts.add(exl3(n, inDim));
            }
            return new DeviceMatrix.Exl3(parts, outDim, inDim);
        }
        float scale = (float) Math.sqrt(3.0 / inDim);
        Quantization q = format.quantization();
        if (q == Quantization.NONE) {
            return new DeviceMatrix.Bf16(fill(outDim, inDim, 0f, scale), outDim, inDim);
        }
        fillAt(scratch, (long) outDim * inDim, 0f, scale);
        int br = q.blockRows(), bc = q.blockCols(inDim);
        DeviceMatrix.Fp8 w = new DeviceMatrix.Fp8(out.alloc((long) outDim * inDim), out.alloc(4L * Math.ceilDiv(outDim, br) * Math.ceilDiv(inDim, bc)),
                outDim, inDim, br, bc);
        k.fp8().quantize(scratch, w);
        return w;
    }

    /** An EXL3 projection (rows, cols): its trellis fill_dummy's patterns (any 16-bit state is a codebook value), its sign vectors from the seed. */
    private Exl3Kernels.Weights exl3(int rows, int cols) {
        int kPad = Exl3Matrix.pad(cols), nPad = Exl3Matrix.pad(rows), bits = format.exl3Bits();
        long trellisBytes = (long) kPad * nPad * bits / 8;
        long trellis = fillAt(out.alloc(trellisBytes), trellisBytes / 2, 0f, 1f);
        return new Exl3Kernels.Weights(trellis, signs(kPad, 1f), signs(nPad, (float) (1 / Math.sqrt(cols))), "dummy", rows, cols, 0, nPad / 16, bits,
                Exl3Codebook.MUL1);
    }

    /** n fp16 values ±magnitude on the device. */
    private long signs(int n, float magnitude) {
        SplittableRandom r = new SplittableRandom(seed++);
        short plus = Float.floatToFloat16(magnitude), minus = Float.floatToFloat16(-magnitude);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment host = a.allocate(2L * n);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(ValueLayout.JAVA_SHORT, i, r.nextBoolean() ? plus : minus);
            }
            long p = out.alloc(2L * n);
            out.cuda.copyToDevice(p, host);
            return p;
        }
    }

    @Override
    public void close() {
        if (scratch != 0) {
            out.cuda.sync();
            out.cuda.free(scratch);
        }
    }
}

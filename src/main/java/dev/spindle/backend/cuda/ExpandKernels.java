package dev.spindle.backend.cuda;

import java.lang.foreign.MemorySegment;

/**
 * expand.cu: a quantized weight's rows as the bf16 values the linear layers read (the CPU's {@code expand()} of
 * {@link dev.spindle.model.GgmlMatrix}, {@link dev.spindle.model.MlxMatrix} and {@link dev.spindle.model.Nvfp4Matrix}, to the
 * bit), written into its rows of a bf16 matrix for cuBLASLt's pinned GEMM ({@link DeviceMatrix.Expanded}).
 */
public final class ExpandKernels {
    private final CudaDriver cuda;
    private final MemorySegment ggml, mlx, nvfp4;

    ExpandKernels(CudaDriver cuda, MemorySegment module) {
        this.cuda = cuda;
        ggml = cuda.function(module, "expand_ggml");
        mlx = cuda.function(module, "expand_mlx");
        nvfp4 = cuda.function(module, "expand_nvfp4");
    }

    /** One quantized projection on the device, with what its kernel needs to expand it. */
    public sealed interface Part permits Ggml, Mlx, Nvfp4 {
        int rows();

        int cols();

        /** Bytes a decode step reads of it (its codes and scales). */
        long bytes();

        /** The format as the start log names it (the host matrix's {@code format()}). */
        String format();
    }

    /**
     * ggml blocks (a GGUF tensor): rows of rowBytes bytes of blocks of {@code type} ({@link dev.spindle.model.gguf.GgmlType}'s
     * id, block shape).
     */
    public record Ggml(long data, long rowBytes, int type, int blockElements, int blockBytes, int rows, int cols, String format) implements Part {
        @Override
        public long bytes() {
            return rows * rowBytes;
        }
    }

    /** MLX affine: packed U32 codes, scales and biases of dtype kind (0 bf16, 1 f16, 2 f32) a group. */
    public record Mlx(long data, long scales, long biases, int kind, int groupSize, int bits, int rows, int cols, String format) implements Part {
        @Override
        public long bytes() {
            int floatBytes = kind == 2 ? 4 : 2;
            return (long) rows * cols * bits / 8 + 2L * floatBytes * rows * (cols / groupSize);
        }
    }

    /** NVFP4: e2m1 codes two a byte, an e4m3 scale a group of 16, the tensor scale (divided by, or multiplied). */
    public record Nvfp4(long data, long scales, float global, boolean divides, int rows, int cols, String format) implements Part {
        @Override
        public long bytes() {
            return (long) rows * cols / 2 + (long) rows * cols / 16;
        }
    }

    /** Part p's rows as bf16 into rows [row0, row0 + p.rows()) of out ((_, p.cols()) bf16); in stream order. */
    public void expand(Part p, long out, int row0) {
        switch (p) {
            case Ggml g -> cuda.launch(ggml, g.rows(), Math.ceilDiv(g.cols() / g.blockElements(), 128), 128, g.data(), g.rowBytes(), g.type(),
                    g.blockElements(), g.blockBytes(), g.rows(), g.cols(), out, row0);
            case Mlx m -> cuda.launch(mlx, m.rows(), Math.ceilDiv(m.cols() / m.groupSize(), 128), 128, m.data(), m.scales(), m.biases(), m.kind(),
                    m.groupSize(), m.bits(), m.rows(), m.cols(), out, row0);
            case Nvfp4 f -> cuda.launch(nvfp4, f.rows(), Math.ceilDiv(f.cols() / 16, 128), 128, f.data(), f.scales(), f.global(), f.divides() ? 1 : 0,
                    f.rows(), f.cols(), out, row0);
        }
    }
}

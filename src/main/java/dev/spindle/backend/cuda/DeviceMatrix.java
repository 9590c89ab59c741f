package dev.spindle.backend.cuda;

/**
 * A linear layer's weight in device memory, {@code (rows, cols)} = (output features, input features), in its format:
 * the device twin of {@link dev.spindle.model.Matrix}. {@link Linear} switches on the format; a new format is a new
 * record here, its upload in {@link CudaWeights}, and its kernels.
 */
sealed interface DeviceMatrix permits DeviceMatrix.Bf16, DeviceMatrix.Fp8, DeviceMatrix.Exl3, DeviceMatrix.Expanded {
    int rows();

    int cols();

    /**
     * bf16, row-major, as published.
     *
     * @param data the device address of (rows, cols) bf16
     */
    record Bf16(long data, int rows, int cols) implements DeviceMatrix {
    }

    /**
     * fp8 E4M3 with fp32 scales ({@link dev.spindle.model.Fp8Matrix}'s layout): element (i, j) is read as
     * {@code bf16(decode(data[i][j]) * scales[i / blockRows][j / blockCols])} (fp8.cuh).
     *
     * @param data   the device address of (rows, cols) E4M3 codes
     * @param scales the device address of (ceil(rows / blockRows), ceil(cols / blockCols)) fp32
     */
    record Fp8(long data, long scales, int rows, int cols, int blockRows, int blockCols) implements DeviceMatrix {
        /** Bytes of the bf16 matrix its values expand to. */
        long expandedBytes() {
            return 2L * rows * cols;
        }
    }

    /**
     * EXL3 (exllamav3's trellis-coded weights): one or more projections stacked along the outputs (q|k|v, gate|up), each
     * with its own trellis and sign vectors, so each is its own {@code exl3_had_in}, {@code exl3_gemv}, {@code exl3_had_out}
     * (their su differ) writing its columns of the stacked output.
     *
     * @param parts the projections in output order, each {@link Exl3Kernels.Weights} of its host matrix's rows
     */
    record Exl3(java.util.List<Exl3Kernels.Weights> parts, int rows, int cols) implements DeviceMatrix {
        public Exl3 {
            parts = java.util.List.copyOf(parts);
            if (parts.stream().mapToInt(p -> p.rows()).sum() != rows || parts.stream().anyMatch(p -> p.cols() != cols)) {
                throw new IllegalArgumentException("EXL3 parts of " + parts.stream().map(p -> p.rows() + " x " + p.cols()).toList()
                        + " do not stack to " + rows + " x " + cols);
            }
        }

        /** Bytes a decode step reads: each part's trellis tiles of its own outputs and its sign vectors. */
        long decodeBytes() {
            return parts.stream().mapToLong(Exl3Kernels.Weights::decodeBytes).sum();
        }
    }

    /**
     * A format read by expanding it: ggml blocks (GGUF), MLX affine, NVFP4. Each projection of the stack is expanded into its
     * rows of a bf16 matrix ({@link ExpandKernels}: the CPU's values to the bit), which cuBLASLt's pinned GEMM reads; the same
     * bits at every row count. The bytes a step moves are the expansion's, not the quantized ones: correct everywhere, not yet
     * fast (kernels that dequantize in the GEMV's main loop come next).
     */
    record Expanded(java.util.List<ExpandKernels.Part> parts, int rows, int cols) implements DeviceMatrix {
        public Expanded {
            parts = java.util.List.copyOf(parts);
            if (parts.stream().mapToInt(ExpandKernels.Part::rows).sum() != rows || parts.stream().anyMatch(p -> p.cols() != cols)) {
                throw new IllegalArgumentException("expanded parts of " + parts.stream().map(p -> p.rows() + " x " + p.cols()).toList() + " do not stack to "
                        + rows + " x " + cols);
            }
        }

        /** Bytes of the bf16 matrix its values expand to. */
        long expandedBytes() {
            return 2L * rows * cols;
        }
    }
}

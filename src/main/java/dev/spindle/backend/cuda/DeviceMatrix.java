package dev.spindle.backend.cuda;

/**
 * A linear layer's weight in device memory, {@code (rows, cols)} = (output features, input features), in its format:
 * the device twin of {@link dev.spindle.model.Matrix}. {@link Linear} switches on the format; a new format is a new
 * record here, its upload in {@link CudaWeights}, and its kernels.
 */
sealed interface DeviceMatrix permits DeviceMatrix.Bf16, DeviceMatrix.Fp8 {
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
}

package dev.spindle.backend.cuda;

/**
 * A linear layer's weight in device memory, {@code (rows, cols)} = (output features, input features), in its format:
 * the device twin of {@link dev.spindle.model.Matrix}. {@link Linear} switches on the format; a new format is a new
 * record here, its upload in {@link CudaWeights}, and its kernels.
 */
sealed interface DeviceMatrix permits DeviceMatrix.Bf16 {
    int rows();

    int cols();

    /**
     * bf16, row-major, as published.
     *
     * @param data the device address of (rows, cols) bf16
     */
    record Bf16(long data, int rows, int cols) implements DeviceMatrix {
    }
}

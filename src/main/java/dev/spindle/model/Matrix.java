package dev.spindle.model;

import java.util.List;

/**
 * A linear layer's weight, {@code (rows, cols)} = (output features, input features), in the format
 * its checkpoint stores it. Each format is a record of its parts (the data, and where the format has
 * them scales, zero points, codebooks, sign vectors), each part a {@link Tensor} with its shape. A
 * backend's linear layer switches on the format; a new format is a new record here, its reading in
 * the loader, and its kernels in each backend.
 */
public sealed interface Matrix permits Bf16Matrix, Exl3Matrix, Fp8Matrix, GgmlMatrix, MlxMatrix, Nvfp4Matrix {
    /** The part holding the values, (rows, cols) in the format's element type; its name is the weight's. */
    Tensor data();

    /** The checkpoint's name of the weight. */
    default String name() {
        return data().name();
    }

    /** Output features. */
    default int rows() {
        return data().dim(0);
    }

    /** Input features. */
    default int cols() {
        return data().dim(1);
    }

    /** The format as the start log and /v1/models name it. */
    String format();

    /** Its parts, as stored. */
    List<Tensor> parts();

    /** Rows [first, first + count) (a column-parallel rank's share), in the same format. */
    Matrix rows(int first, int count);

    /** Bytes of all its parts. */
    default long bytes() {
        return parts().stream().mapToLong(t -> t.data().byteSize()).sum();
    }
}

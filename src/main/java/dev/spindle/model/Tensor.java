package dev.spindle.model;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * An array in memory: {@code dtype} values of {@code shape}, row-major, backed by a memory segment
 * (a mapping of the checkpoint file, or off-heap memory for converted and dummy weights). Never on
 * the Java heap. A weight matrix is one or more of them ({@link Matrix}).
 */
public record Tensor(String name, DType dtype, long[] shape, MemorySegment data) {
    public Tensor {
        shape = shape.clone();
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        if (data.byteSize() != n * dtype.bytes) {
            throw new IllegalArgumentException(name + ": " + data.byteSize() + " bytes for " + dtype + " shape " + Arrays.toString(shape));
        }
    }

    /** A bf16 array. */
    public Tensor(String name, long[] shape, MemorySegment data) {
        this(name, DType.BF16, shape, data);
    }

    /** Size of dimension {@code i}. */
    public int dim(int i) {
        return Math.toIntExact(shape[i]);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** Rows [first, first + count) of a two-dimensional tensor (its first dimension), the same bytes. */
    public Tensor rows(int first, int count) {
        long row = data.byteSize() / shape[0];
        return new Tensor(name, dtype, new long[]{count, shape[1]}, data.asSlice(first * row, count * row));
    }
}

package dev.spindle.model;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A weight in memory: a bf16 row-major array of {@code shape} backed by a memory
 * segment (a mapping of the safetensors file, or off-heap memory for converted
 * and dummy weights). Never on the Java heap.
 */
public record Tensor(String name, long[] shape, MemorySegment data) {
    public Tensor {
        shape = shape.clone();
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        if (data.byteSize() != n * 2) {
            throw new IllegalArgumentException(name + ": " + data.byteSize() + " bytes for bf16 shape " + Arrays.toString(shape));
        }
    }

    /** Size of dimension {@code i}. */
    public int dim(int i) {
        return Math.toIntExact(shape[i]);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }
}

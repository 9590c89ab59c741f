package dev.spindle.model;

import java.nio.file.Path;
import java.util.Arrays;

/**
 * One tensor as a safetensors header describes it: its element type, shape and
 * byte range [begin, end) inside the file's data section (after the header).
 */
public record TensorInfo(String name, DType dtype, long[] shape, long begin, long end, Path file) {
    public TensorInfo {
        shape = shape.clone();
    }

    public long elements() {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    public String shapeString() {
        return Arrays.toString(shape);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }
}

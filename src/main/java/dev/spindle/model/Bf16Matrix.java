package dev.spindle.model;

import java.util.List;

/**
 * A bf16 weight as published: one part, {@code data} (rows, cols) bf16, row-major.
 */
public record Bf16Matrix(Tensor data) implements Matrix {
    public Bf16Matrix {
        if (data.shape().length != 2 || data.dtype() != DType.BF16) {
            throw new IllegalArgumentException(data.name() + ": a bf16 matrix is a two-dimensional bf16 tensor");
        }
    }

    @Override
    public String format() {
        return "bf16";
    }

    @Override
    public List<Tensor> parts() {
        return List.of(data);
    }

    @Override
    public Bf16Matrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows()) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows());
        }
        long rowBytes = 2L * cols();
        return new Bf16Matrix(new Tensor(name(), new long[]{count, cols()}, data.data().asSlice(first * rowBytes, count * rowBytes)));
    }
}

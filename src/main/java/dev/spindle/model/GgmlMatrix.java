package dev.spindle.model;

import dev.spindle.model.gguf.GgmlBlocks;
import dev.spindle.model.gguf.GgmlType;

import java.util.List;

/**
 * A weight in one of ggml's block formats, as a GGUF file stores it: {@code data} (rows, row bytes) of raw blocks, each
 * row {@code cols} elements in whole blocks of {@code type}. A linear layer reads element (i, j) as the bf16 value of
 * ggml's own fp32 decoding ({@link GgmlBlocks}) and computes what the bf16 matmul computes over those values, as for fp8
 * ({@link Fp8Matrix}): one rounding of 2^-9 relative on top of the format's own error (for Q8_0, the finest, a few percent
 * more error variance), so every row count can share one GEMM's bits on the GPU.
 */
public record GgmlMatrix(Tensor data, GgmlType type, int cols) implements Matrix {
    public GgmlMatrix {
        if (data.shape().length != 2 || data.dtype() != DType.BLOCKS || !type.quantized() || data.shape()[1] != type.rowBytes(cols)) {
            throw new IllegalArgumentException(data.name() + ": a " + type + " matrix of " + cols + " columns is (rows, " + type.rowBytes(cols) + ") bytes of blocks");
        }
    }

    @Override
    public int cols() {
        return cols;
    }

    /** Bytes of one row. */
    public long rowBytes() {
        return data.shape()[1];
    }

    @Override
    public String format() {
        return "gguf " + type.name();
    }

    @Override
    public List<Tensor> parts() {
        return List.of(data);
    }

    @Override
    public GgmlMatrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows()) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows());
        }
        return new GgmlMatrix(new Tensor(name(), DType.BLOCKS, new long[]{count, rowBytes()}, data.data().asSlice(first * rowBytes(), count * rowBytes())),
                type, cols);
    }

    /** Row i's columns [col, col + k) (whole blocks) as the bf16 values a linear layer reads, into out[0, k). */
    public void expand(int i, int col, int k, float[] out) {
        if (col % type.blockElements != 0 || k % type.blockElements != 0 || col + k > cols) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + name() + " cut its " + type + " blocks");
        }
        GgmlBlocks.decode(type, data.data(), i * rowBytes() + type.rowBytes(col), k, out, 0);
        for (int j = 0; j < k; j++) {
            out[j] = Bf16.round(out[j]);
        }
    }
}

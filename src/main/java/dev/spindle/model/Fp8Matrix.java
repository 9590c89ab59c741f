package dev.spindle.model;

import java.util.List;

/**
 * An fp8 E4M3 weight with fp32 scales: {@code data} (rows, cols) E4M3, row-major, and {@code scales}
 * (ceil(rows / blockRows), ceil(cols / blockCols)) fp32; element (i, j) stands for
 * {@code decode(data[i][j]) * scales[i / blockRows][j / blockCols]}. Per-row scales are blockRows 1 and blockCols cols
 * (compressed-tensors' channel strategy, what {@code --quantization fp8} makes); DeepSeek-style checkpoints use 128 x 128
 * blocks ({@code weight_block_size}, the scales named {@code weight_scale_inv}).
 * <p>
 * A linear layer reads element (i, j) as the bf16 value {@code bf16(decode(data[i][j]) * scale)} (fp32 product, one
 * rounding) and computes what the bf16 matmul computes over those values: one fp32 dot product an output, one rounding
 * to bf16 (CPU reference: backend.cpu.Fp8MatMul; CUDA: fp8.cuh). The extra rounding of each weight is 2^-9 relative at
 * most, against the 2^-4 of E4M3 itself, and lets every row count share one GEMM's bits.
 */
public record Fp8Matrix(Tensor data, Tensor scales, int blockRows, int blockCols) implements Matrix {
    public Fp8Matrix {
        if (data.shape().length != 2 || data.dtype() != DType.F8_E4M3) {
            throw new IllegalArgumentException(data.name() + ": an fp8 matrix is a two-dimensional F8_E4M3 tensor");
        }
        if (blockRows < 1 || blockCols < 1) {
            throw new IllegalArgumentException(data.name() + ": scale blocks of " + blockRows + " x " + blockCols);
        }
        long sr = Math.ceilDiv(data.shape()[0], blockRows), sc = Math.ceilDiv(data.shape()[1], blockCols);
        long[] s = scales.shape();
        long n = 1;
        for (long d : s) {
            n *= d;
        }
        if (scales.dtype() != DType.F32 || n != sr * sc || (s.length == 2 && (s[0] != sr || s[1] != sc))) {
            throw new IllegalArgumentException(scales.name() + ": expected " + sr + " x " + sc + " F32 scales for " + data.name() + " ("
                    + data.shape()[0] + " x " + data.shape()[1] + " in blocks of " + blockRows + " x " + blockCols + ")");
        }
    }

    /** Whether each output row has one scale (no blocks along the columns). */
    public boolean perRow() {
        return blockRows == 1 && blockCols == cols();
    }

    @Override
    public String format() {
        return perRow() ? "fp8-e4m3 (per-row scales)" : "fp8-e4m3 (" + blockRows + "x" + blockCols + " block scales)";
    }

    @Override
    public List<Tensor> parts() {
        return List.of(data, scales);
    }

    /** The scale of element (i, j). */
    public float scale(int i, int j) {
        int sc = Math.ceilDiv(cols(), blockCols);
        return scales.data().getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, (long) (i / blockRows) * sc + j / blockCols);
    }

    @Override
    public Fp8Matrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows()) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows());
        }
        if (first % blockRows != 0 || (count % blockRows != 0 && first + count != rows())) {
            throw new IllegalArgumentException("rows [" + first + ", " + (first + count) + ") of " + name() + " cut its " + blockRows
                    + "-row scale blocks");
        }
        long sc = Math.ceilDiv(cols(), blockCols), sFirst = first / blockRows, sCount = Math.ceilDiv(count, blockRows);
        return new Fp8Matrix(new Tensor(name(), DType.F8_E4M3, new long[]{count, cols()}, data.data().asSlice((long) first * cols(), (long) count * cols())),
                new Tensor(scales.name(), DType.F32, new long[]{sCount, sc}, scales.data().asSlice(4 * sFirst * sc, 4 * sCount * sc)),
                blockRows, blockCols);
    }
}

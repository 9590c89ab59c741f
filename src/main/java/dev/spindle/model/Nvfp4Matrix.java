package dev.spindle.model;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * An NVFP4 weight: 4-bit floats (E2M1: sign, 2 exponent bits, 1 mantissa bit; the values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
 * their negatives), two a byte along a row (the even column in the low nibble), and one E4M3 scale a group of 16 columns.
 * {@code data} is (rows, cols / 2) bytes however the checkpoint typed them (compressed-tensors' and ModelOpt's U8, MLX's
 * U32 words: the same bytes little-endian); {@code scales} (rows, cols / 16) E4M3 bytes. A tensor-wide factor completes
 * the group scale: compressed-tensors divides by its {@code weight_global_scale}, ModelOpt multiplies by its
 * {@code weight_scale_2}, mlx-lm's checkpoints have none (1). Element (i, j) as a linear layer reads it:
 * {@code bf16(e2m1(q) * t)}, {@code t = fp32(e4m3(s) / global)} or {@code fp32(e4m3(s) * global)}, each step one fp32
 * rounding, as the formats' own dequantizers compute it.
 */
public record Nvfp4Matrix(Tensor data, Tensor scales, float global, boolean divides, int cols) implements Matrix {
    /** Columns sharing one E4M3 scale. */
    public static final int GROUP = 16;
    private static final float[] E2M1 = {0f, 0.5f, 1f, 1.5f, 2f, 3f, 4f, 6f, -0f, -0.5f, -1f, -1.5f, -2f, -3f, -4f, -6f};
    private static final float[] E4M3 = Fp8.table();

    public Nvfp4Matrix {
        long rows = data.shape()[0];
        if (cols % GROUP != 0 || data.shape().length != 2 || data.data().byteSize() != rows * cols / 2) {
            throw new IllegalArgumentException(data.name() + ": an NVFP4 matrix of " + cols + " columns (a multiple of 16) is (rows, " + cols / 2
                    + ") bytes, got " + java.util.Arrays.toString(data.shape()) + " " + data.dtype());
        }
        if (scales.shape().length != 2 || scales.shape()[0] != rows || scales.shape()[1] != cols / GROUP || scales.data().byteSize() != rows * cols / GROUP) {
            throw new IllegalArgumentException(scales.name() + ": expected (" + rows + ", " + cols / GROUP + ") E4M3 scales for " + data.name()
                    + ", got " + java.util.Arrays.toString(scales.shape()) + " " + scales.dtype());
        }
        if (!(global > 0) || Float.isInfinite(global)) {
            throw new IllegalArgumentException(data.name() + ": its tensor scale is " + global + " (expected a positive finite number)");
        }
    }

    @Override
    public int cols() {
        return cols;
    }

    @Override
    public String format() {
        return "nvfp4 (e2m1, an e4m3 scale a group of 16" + (global == 1f && !divides ? "" : ", a tensor scale") + ")";
    }

    @Override
    public List<Tensor> parts() {
        return List.of(data, scales);
    }

    @Override
    public Nvfp4Matrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows()) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows());
        }
        return new Nvfp4Matrix(data.rows(first, count), scales.rows(first, count), global, divides, cols);
    }


    /** The fp32 factor of row i's group g: its E4M3 scale with the tensor scale applied. */
    private float groupScale(long g) {
        float s = E4M3[scales.data().get(ValueLayout.JAVA_BYTE, g) & 0xFF];
        return divides ? s / global : s * global;
    }

    /** Row i's columns [col, col + k) as the bf16 values a linear layer reads, into out[0, k). */
    public void expand(int i, int col, int k, float[] out) {
        if (col < 0 || col + k > cols) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + name() + "'s " + cols);
        }
        MemorySegment codes = data.data();
        long rowBytes = cols / 2, rowGroups = cols / GROUP;
        float t = 0;
        for (int j = col; j < col + k; j++) {
            if (j == col || j % GROUP == 0) {
                t = groupScale((long) i * rowGroups + j / GROUP);
            }
            int b = codes.get(ValueLayout.JAVA_BYTE, (long) i * rowBytes + j / 2) & 0xFF;
            out[j - col] = Bf16.round(E2M1[(j & 1) == 0 ? b & 0xF : b >>> 4] * t);
        }
    }
}

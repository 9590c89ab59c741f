package dev.spindle.model;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

/**
 * An MLX affine-quantized weight as mlx-lm saves it: {@code data} (rows, cols x bits / 32) U32 words holding each row's
 * codes as one little-endian bit stream ({@code bits} a code, the first code in the lowest bits), and per group of
 * {@code groupSize} columns a {@code scales} and a {@code biases} value (the model's float dtype): element (i, j) is
 * {@code scale * q + bias}. A linear layer reads it as the bf16 value of that fp32 product and sum (not fused), as every
 * other quantized format here ({@link Fp8Matrix}).
 */
public record MlxMatrix(Tensor data, Tensor scales, Tensor biases, int cols, int groupSize, int bits) implements Matrix {
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    public MlxMatrix {
        long rows = data.shape()[0];
        if (data.dtype() != DType.U32 || data.shape().length != 2 || (long) cols * bits != data.shape()[1] * 32 || cols % groupSize != 0) {
            throw new IllegalArgumentException(data.name() + ": an MLX " + bits + "-bit matrix of " + cols + " columns in groups of " + groupSize
                    + " is (rows, " + (long) cols * bits / 32 + ") U32, got " + java.util.Arrays.toString(data.shape()) + " " + data.dtype());
        }
        for (Tensor t : List.of(scales, biases)) {
            if (t.shape().length != 2 || t.shape()[0] != rows || t.shape()[1] != cols / groupSize || t.dtype() == DType.U32 || t.dtype() == DType.BLOCKS
                    || t.dtype() == DType.F8_E4M3) {
                throw new IllegalArgumentException(t.name() + ": expected (" + rows + ", " + cols / groupSize + ") floats for " + data.name());
            }
        }
    }

    @Override
    public int cols() {
        return cols;
    }

    @Override
    public String format() {
        return "mlx affine " + bits + "-bit (groups of " + groupSize + ")";
    }

    @Override
    public List<Tensor> parts() {
        return List.of(data, scales, biases);
    }

    @Override
    public MlxMatrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows()) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows());
        }
        return new MlxMatrix(data.rows(first, count), scales.rows(first, count), biases.rows(first, count), cols, groupSize, bits);
    }


    private static float value(Tensor t, long i) {
        MemorySegment s = t.data();
        return switch (t.dtype()) {
            case BF16 -> Float.intBitsToFloat(s.getAtIndex(I16, i) << 16);
            case F16 -> Float.float16ToFloat(s.getAtIndex(I16, i));
            case F32 -> s.getAtIndex(F32, i);
            default -> throw new IllegalStateException(t.name() + " is " + t.dtype());
        };
    }

    /** Row i's columns [col, col + k) as the bf16 values a linear layer reads, into out[0, k). */
    public void expand(int i, int col, int k, float[] out) {
        if (col < 0 || col + k > cols) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + name() + "'s " + cols);
        }
        long rowBits = (long) cols * bits, base = (long) i * (rowBits / 32);
        int groups = cols / groupSize, mask = (1 << bits) - 1;
        MemorySegment words = data.data();
        for (int j = col; j < col + k; j++) {
            long bit = (long) j * bits, w = base + bit / 32;
            int shift = (int) (bit % 32);
            long two = Integer.toUnsignedLong(words.getAtIndex(U32, w)) | (shift + bits > 32 ? Integer.toUnsignedLong(words.getAtIndex(U32, w + 1)) << 32 : 0);
            int q = (int) (two >>> shift) & mask;
            long g = (long) i * groups + j / groupSize;
            out[j - col] = Bf16.round(value(scales, g) * q + value(biases, g));
        }
    }
}

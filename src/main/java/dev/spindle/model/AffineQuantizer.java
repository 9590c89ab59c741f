package dev.spindle.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Packs a bf16 matrix into MLX's affine layout ({@link MlxMatrix}) at load: per group of {@code groupSize} columns, the
 * bf16 scale {@code (max - min) / (2^bits - 1)} (1 where the group is constant) and bias {@code min}, and each code
 * {@code round((w - bias) / scale)} (ties to even) clamped to {@code [0, 2^bits - 1]}, computed in double against the
 * rounded scale and bias: the scheme scripts/make_mlx_fixture.py writes checkpoints with, bit for bit.
 */
public final class AffineQuantizer {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private AffineQuantizer() {
    }

    /** {@code m} as {@code bits}-bit affine codes in groups of {@code groupSize} columns, its parts in {@code arena}. */
    public static MlxMatrix quantize(Bf16Matrix m, int bits, int groupSize, Arena arena) {
        int rows = m.rows(), cols = m.cols();
        if (bits < 2 || bits > 8 || cols % groupSize != 0 || (long) cols * bits % 32 != 0) {
            throw new IllegalArgumentException(m.name() + ": " + cols + " columns do not pack as " + bits + "-bit codes in groups of " + groupSize);
        }
        int groups = cols / groupSize, levels = (1 << bits) - 1, wordsPerRow = cols * bits / 32;
        MemorySegment src = m.data().data();
        MemorySegment words = arena.allocate(4L * rows * wordsPerRow, 64), scales = arena.allocate(2L * rows * groups, 64),
                biases = arena.allocate(2L * rows * groups, 64);
        for (int i = 0; i < rows; i++) {
            for (int g = 0; g < groups; g++) {
                double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
                for (int j = g * groupSize; j < (g + 1) * groupSize; j++) {
                    double w = Bf16.toFloat(src.getAtIndex(I16, (long) i * cols + j));
                    lo = Math.min(lo, w);
                    hi = Math.max(hi, w);
                }
                double scale = (hi - lo) / levels;
                short sb = Bf16.fromFloat((float) (scale == 0 ? 1 : scale)), bb = Bf16.fromFloat((float) lo);
                scales.setAtIndex(I16, (long) i * groups + g, sb);
                biases.setAtIndex(I16, (long) i * groups + g, bb);
                double s = Bf16.toFloat(sb), z = Bf16.toFloat(bb);
                for (int j = g * groupSize; j < (g + 1) * groupSize; j++) {
                    double w = Bf16.toFloat(src.getAtIndex(I16, (long) i * cols + j));
                    long q = Math.max(0, Math.min(levels, (long) Math.rint((w - z) / s)));
                    long bit = (long) j * bits, at = (long) i * wordsPerRow + bit / 32;
                    int shift = (int) (bit % 32);
                    words.setAtIndex(U32, at, words.getAtIndex(U32, at) | (int) (q << shift));
                    if (shift + bits > 32) {
                        words.setAtIndex(U32, at + 1, words.getAtIndex(U32, at + 1) | (int) (q >>> (32 - shift)));
                    }
                }
            }
        }
        String base = m.name().endsWith(".weight") ? m.name().substring(0, m.name().length() - ".weight".length()) : m.name();
        return new MlxMatrix(new Tensor(m.name(), DType.U32, new long[]{rows, wordsPerRow}, words),
                new Tensor(base + ".scales", new long[]{rows, groups}, scales), new Tensor(base + ".biases", new long[]{rows, groups}, biases),
                cols, groupSize, bits);
    }
}

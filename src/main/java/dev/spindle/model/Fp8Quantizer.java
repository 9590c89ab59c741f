package dev.spindle.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;
import java.util.stream.IntStream;

/**
 * Quantizes bf16 weights to fp8 E4M3 at load, without calibration data: each block's scale is its largest magnitude
 * over 448 (fp32), each value {@code encode(w / scale)} (nearest, ties to even). A block of zeros gets scale 1.
 */
public final class Fp8Quantizer {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private Fp8Quantizer() {
    }

    /** The model's linear layers quantized as {@code q} says (NONE: the weights as they are). */
    public static ModelWeights apply(ModelWeights w, Quantization q, Arena arena) {
        if (q == Quantization.NONE) {
            return w;
        }
        List<LayerWeights> layers = IntStream.range(0, w.layers().size()).parallel().mapToObj(i -> {
            LayerWeights l = w.layers().get(i);
            return new LayerWeights(l.inputNorm(), quantize(l.q(), q, arena), quantize(l.k(), q, arena), quantize(l.v(), q, arena),
                    quantize(l.o(), q, arena), l.postAttnNorm(), quantize(l.gate(), q, arena), quantize(l.up(), q, arena), quantize(l.down(), q, arena));
        }).toList();
        return new ModelWeights(w.embedding(), layers, w.finalNorm(), w.lmHead());
    }

    private static Matrix quantize(Matrix m, Quantization q, Arena arena) {
        return switch (m) {
            case Bf16Matrix b -> quantize(b, q.blockRows(), q.blockCols(b.cols()), arena);
            case Fp8Matrix f -> throw new IllegalArgumentException(f.name() + " is already " + f.format() + "; --quantization applies to a bf16 release");
            case GgmlMatrix g -> throw new IllegalArgumentException(g.name() + " is already " + g.format() + "; --quantization applies to a bf16 release");
            case MlxMatrix a -> throw new IllegalArgumentException(a.name() + " is already " + a.format() + "; --quantization applies to a bf16 release");
            case Nvfp4Matrix a -> throw new IllegalArgumentException(a.name() + " is already " + a.format() + "; --quantization applies to a bf16 release");
            case Exl3Matrix a -> throw new IllegalArgumentException(a.name() + " is already " + a.format() + "; --quantization applies to a bf16 release");
        };
    }

    /** {@code m} as E4M3 with one scale per blockRows x blockCols block. */
    public static Fp8Matrix quantize(Bf16Matrix m, int blockRows, int blockCols, Arena arena) {
        int rows = m.rows(), cols = m.cols(), sr = Math.ceilDiv(rows, blockRows), sc = Math.ceilDiv(cols, blockCols);
        MemorySegment src = m.data().data();
        MemorySegment data = arena.allocate((long) rows * cols, 64), scales = arena.allocate(4L * sr * sc, 64);
        for (int bi = 0; bi < sr; bi++) {
            int r0 = bi * blockRows, r1 = Math.min(rows, r0 + blockRows);
            for (int bj = 0; bj < sc; bj++) {
                int c0 = bj * blockCols, c1 = Math.min(cols, c0 + blockCols);
                float amax = 0f;
                for (int r = r0; r < r1; r++) {
                    for (int c = c0; c < c1; c++) {
                        amax = Math.max(amax, Math.abs(Bf16.toFloat(src.getAtIndex(BF16, (long) r * cols + c))));
                    }
                }
                float scale = amax > 0 ? amax / Fp8.MAX : 1f;
                scales.setAtIndex(F32, (long) bi * sc + bj, scale);
                for (int r = r0; r < r1; r++) {
                    for (int c = c0; c < c1; c++) {
                        long i = (long) r * cols + c;
                        data.set(ValueLayout.JAVA_BYTE, i, Fp8.encode(Bf16.toFloat(src.getAtIndex(BF16, i)) / scale));
                    }
                }
            }
        }
        return new Fp8Matrix(new Tensor(m.name(), DType.F8_E4M3, new long[]{rows, cols}, data),
                new Tensor(m.name() + "_scale", DType.F32, new long[]{sr, sc}, scales), blockRows, blockCols);
    }
}

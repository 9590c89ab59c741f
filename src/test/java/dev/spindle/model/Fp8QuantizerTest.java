package dev.spindle.model;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class Fp8QuantizerTest {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static Bf16Matrix random(Arena arena, int rows, int cols, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        MemorySegment m = arena.allocate(2L * rows * cols, 64);
        for (long i = 0; i < (long) rows * cols; i++) {
            // mostly small weights, a few outliers, some exact zeros
            double v = rnd.nextInt(50) == 0 ? rnd.nextGaussian() * 0.5 : rnd.nextInt(40) == 0 ? 0 : rnd.nextGaussian() * 0.02;
            m.setAtIndex(BF16, i, Bf16.fromFloat((float) v));
        }
        return new Bf16Matrix(new Tensor("w", new long[]{rows, cols}, m));
    }

    /** Each value is within half an E4M3 step of its block's scaled value, and each block's largest magnitude is ±448 exactly. */
    @Test
    void everyValueIsItsNearestCodeTimesItsBlocksScale() {
        try (Arena arena = Arena.ofConfined()) {
            Bf16Matrix w = random(arena, 300, 200, 7);
            for (Quantization q : new Quantization[]{Quantization.FP8_ROW, Quantization.FP8_BLOCK}) {
                Fp8Matrix f = Fp8Quantizer.quantize(w, q.blockRows, Math.min(q.blockCols, w.cols()), arena);
                assertEquals(q == Quantization.FP8_ROW, f.perRow());
                for (int i = 0; i < w.rows(); i++) {
                    for (int j = 0; j < w.cols(); j++) {
                        float v = Bf16.toFloat(w.data().data().getAtIndex(BF16, (long) i * w.cols() + j));
                        float s = f.scale(i, j);
                        byte code = f.data().data().get(ValueLayout.JAVA_BYTE, (long) i * w.cols() + j);
                        assertEquals(Fp8.encode(v / s), code, q + " (" + i + ", " + j + ")");
                        float back = Fp8.decode(code) * s;
                        float step = Math.abs(v / s) < 0x1p-6f ? 0x1p-9f : Math.scalb(1f, Math.getExponent(v / s) - 3);
                        assertTrue(Math.abs(back - v) <= step / 2 * s * 1.0001f, q + " (" + i + ", " + j + "): " + v + " -> " + back);
                    }
                }
            }
        }
    }

    @Test
    void rowSlicesKeepTheirScalesAndRefuseToCutABlock() {
        try (Arena arena = Arena.ofConfined()) {
            Bf16Matrix w = random(arena, 256, 128, 8);
            Fp8Matrix block = Fp8Quantizer.quantize(w, 128, 128, arena);
            Fp8Matrix half = block.rows(128, 128);
            assertEquals(block.scale(200, 5), half.scale(72, 5));
            assertThrows(IllegalArgumentException.class, () -> block.rows(64, 128));
            Fp8Matrix row = Fp8Quantizer.quantize(w, 1, 128, arena);
            assertEquals(row.scale(77, 0), row.rows(70, 20).scale(7, 0));
        }
    }

    @Test
    void quantizationNamesParseAndUnknownOnesAreRefusedByName() {
        assertEquals(Quantization.FP8_BLOCK, Quantization.parse("fp8"));
        assertEquals(Quantization.FP8_BLOCK, Quantization.parse("FP8-block"));
        assertEquals(Quantization.NONE, Quantization.parse("none"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Quantization.parse("awq"));
        assertTrue(e.getMessage().contains("awq"), e.getMessage());
    }
}

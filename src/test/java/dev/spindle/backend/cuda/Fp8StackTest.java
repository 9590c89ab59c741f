package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.Fp8Quantizer;
import dev.spindle.model.Tensor;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The fused fp8 matrices' scales as the device reads them (no GPU): every element of every part gets its own scale, whether
 * the parts' blocks stack (the 33B's q|k|v: 7,168, 1,024 and 1,024 rows in 128-row blocks) or must be written out a row at a
 * time (the bundled model's 320, 64 and 64 rows; per-tensor scales of different parts).
 */
class Fp8StackTest {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static Fp8Matrix part(Arena a, int rows, int cols, int blockRows, int blockCols, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        MemorySegment m = a.allocate(2L * rows * cols, 64);
        for (long i = 0; i < (long) rows * cols; i++) {
            m.setAtIndex(BF16, i, Bf16.fromFloat((float) (rnd.nextGaussian() * Math.scalb(1.0, (int) (i / cols % 7) - 3))));
        }
        return Fp8Quantizer.quantize(new Bf16Matrix(new Tensor("w" + seed, new long[]{rows, cols}, m)), blockRows, blockCols, a);
    }

    private static void everyElementKeepsItsScale(List<Fp8Matrix> parts, Fp8Stack s) {
        int at = 0;
        for (Fp8Matrix p : parts) {
            for (int i = 0; i < p.rows(); i++) {
                for (int j = 0; j < p.cols(); j++) {
                    assertEquals(p.scale(i, j), s.scale(at + i, j), p.name() + " (" + i + ", " + j + ")");
                }
            }
            at += p.rows();
        }
        assertEquals(at, s.rows());
    }

    @Test
    void wholeBlocksStackAsPublished() {
        try (Arena a = Arena.ofConfined()) {
            List<Fp8Matrix> parts = List.of(part(a, 512, 384, 128, 128, 1), part(a, 128, 384, 128, 128, 2), part(a, 256, 384, 128, 128, 3));
            Fp8Stack s = Fp8Stack.of(parts, a);
            assertEquals(128, s.blockRows());
            assertEquals(3, s.scales().size(), "the parts' own scale tensors, nothing written out");
            assertEquals(4L * (896 / 128) * 3, s.scaleBytes());
            everyElementKeepsItsScale(parts, s);
        }
    }

    @Test
    void partialBlocksAndPerTensorScalesAreWrittenOutARowAtATime() {
        try (Arena a = Arena.ofConfined()) {
            List<Fp8Matrix> cut = List.of(part(a, 320, 320, 128, 128, 4), part(a, 64, 320, 128, 128, 5), part(a, 64, 320, 128, 128, 6));
            Fp8Stack s = Fp8Stack.of(cut, a);
            assertEquals(1, s.blockRows());
            assertEquals(4L * 448 * 3, s.scaleBytes());
            everyElementKeepsItsScale(cut, s);
            // per-tensor scales: one block a part, of each part's own rows
            List<Fp8Matrix> tensors = List.of(part(a, 96, 256, 96, 256, 7), part(a, 32, 256, 32, 256, 8));
            Fp8Stack t = Fp8Stack.of(tensors, a);
            assertEquals(1, t.blockRows());
            everyElementKeepsItsScale(tensors, t);
            // per-row scales stack as they are
            List<Fp8Matrix> rows = List.of(part(a, 100, 256, 1, 256, 9), part(a, 30, 256, 1, 256, 10));
            Fp8Stack r = Fp8Stack.of(rows, a);
            assertEquals(2, r.scales().size());
            everyElementKeepsItsScale(rows, r);
        }
    }

    @Test
    void partsWhoseColumnBlocksDifferAreRefusedByName() {
        try (Arena a = Arena.ofConfined()) {
            CudaException e = assertThrows(CudaException.class, () -> Fp8Stack.of(List.of(part(a, 128, 256, 128, 128, 11), part(a, 128, 256, 1, 256, 12)), a));
            assertEquals(true, e.getMessage().contains("w12") && e.getMessage().contains("column blocks must agree"), e.getMessage());
        }
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.Fp8Quantizer;
import dev.spindle.model.Tensor;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class Fp8MatMulTest {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static Bf16Matrix random(Arena arena, int rows, int cols, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        MemorySegment m = arena.allocate(2L * rows * cols, 64);
        for (long i = 0; i < (long) rows * cols; i++) {
            m.setAtIndex(BF16, i, Bf16.fromFloat((float) (rnd.nextGaussian() * 0.05)));
        }
        return new Bf16Matrix(new Tensor("w", new long[]{rows, cols}, m));
    }

    /** n rows of k bf16-valued Gaussian inputs. */
    static float[] rows(int n, int k, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        float[] x = new float[n * k];
        for (int i = 0; i < x.length; i++) {
            x[i] = Bf16.round((float) rnd.nextGaussian());
        }
        return x;
    }

    /**
     * Each weight is read as bf16(decode(q) * scale), and the product is within the rounding of one bf16 output (plus fp32
     * accumulation) of the exact (double) sum over those values.
     */
    @Test
    void matchesTheExpandedProductInDouble() {
        try (Arena arena = Arena.ofShared(); Parallel p = new Parallel(2)) {
            int n = 5, k = 300, nOut = 70;
            Bf16Matrix w = random(arena, nOut, k, 3);
            float[] x = rows(n, k, 4);
            for (int[] block : new int[][]{{1, k}, {128, 128}, {32, 64}}) {
                Fp8Matrix f = Fp8Quantizer.quantize(w, block[0], block[1], arena);
                float[] out = new float[n * nOut];
                new MatMul(p).apply(x, n, f, out);
                for (int r = 0; r < n; r++) {
                    for (int j = 0; j < nOut; j++) {
                        double exact = 0, magnitude = 0;
                        for (int c = 0; c < k; c++) {
                            float value = Bf16.round(Fp8.decode(f.data().data().get(ValueLayout.JAVA_BYTE, (long) j * k + c)) * f.scale(j, c));
                            exact += (double) x[r * k + c] * value;
                            magnitude += Math.abs((double) x[r * k + c] * value);
                        }
                        double got = out[r * nOut + j];
                        assertTrue(Math.abs(got - exact) <= Math.abs(exact) * 0x1p-8 + magnitude * 1e-6, Arrays.toString(block) + " (" + r + ", " + j
                                + "): " + got + " vs " + exact);
                    }
                }
            }
        }
    }

    /** The fp8 layer computes the bf16 layer's bits over the expanded matrix (what the CUDA backend's GEMMs rely on). */
    @Test
    void equalsTheBf16LayerOverTheExpandedWeights() {
        try (Arena arena = Arena.ofShared(); Parallel p = new Parallel(2)) {
            int n = 6, k = 320, nOut = 40;
            for (int[] block : new int[][]{{1, k}, {128, 128}}) {
                Fp8Matrix f = Fp8Quantizer.quantize(random(arena, nOut, k, 8), block[0], block[1], arena);
                MemorySegment expanded = arena.allocate(2L * nOut * k, 64);
                float[] row = new float[k];
                for (int j = 0; j < nOut; j++) {
                    Fp8MatMul.expand(f.data().data(), f, j, 0, k, f.blockCols(), row);
                    for (int c = 0; c < k; c++) {
                        expanded.setAtIndex(BF16, (long) j * k + c, Bf16.fromFloat(row[c]));
                    }
                }
                float[] x = rows(n, k, 9), viaFp8 = new float[n * nOut], viaBf16 = new float[n * nOut];
                MatMul mm = new MatMul(p);
                mm.apply(x, n, f, viaFp8);
                mm.apply(x, n, new Bf16Matrix(new Tensor("w", new long[]{nOut, k}, expanded)), viaBf16);
                assertArrayEquals(viaBf16, viaFp8, Arrays.toString(block));
            }
        }
    }

    /** A row's outputs are the same bits whatever other rows share its call (decode rows equal prefill windows). */
    @Test
    void aRowAloneEqualsTheRowInABatch() {
        try (Arena arena = Arena.ofShared(); Parallel p = new Parallel(2)) {
            int n = 7, k = 260, nOut = 33;
            Fp8Matrix f = Fp8Quantizer.quantize(random(arena, nOut, k, 5), 128, 128, arena);
            float[] x = rows(n, k, 6), all = new float[n * nOut];
            MatMul mm = new MatMul(p);
            mm.apply(x, n, f, all);
            for (int r = 0; r < n; r++) {
                float[] one = new float[nOut];
                mm.apply(Arrays.copyOfRange(x, r * k, (r + 1) * k), 1, f, one);
                assertArrayEquals(Arrays.copyOfRange(all, r * nOut, (r + 1) * nOut), one, "row " + r);
            }
        }
    }
}

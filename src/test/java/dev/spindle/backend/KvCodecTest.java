package dev.spindle.backend;

import dev.spindle.backend.cpu.CpuKvStore;
import dev.spindle.model.Bf16;
import dev.spindle.step.KvDtype;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class KvCodecTest {
    private static float[] vector(SplittableRandom rnd, int hd) {
        float[] v = new float[hd];
        for (int i = 0; i < hd; i++) {
            v[i] = Bf16.round((float) (rnd.nextGaussian() * (i % 17 == 0 ? 8 : 1))); // a few outlier channels, as K has
        }
        return v;
    }

    /** bf16 is exact; each quantized value is within half a step of its group's scale (a step of the code grid times the scale). */
    @Test
    void recordsRoundTripWithinHalfAStep() {
        SplittableRandom rnd = new SplittableRandom(53);
        try (Arena arena = Arena.ofConfined()) {
            for (int hd : new int[]{16, 64, 128}) {
                for (KvDtype d : KvDtype.values()) {
                    MemorySegment rec = arena.allocate(d.vectorBytes(hd));
                    for (int t = 0; t < 200; t++) {
                        float[] v = vector(rnd, hd), back = new float[hd];
                        KvCodec.encode(d, v, 0, hd, rec, 0);
                        KvCodec.decode(d, rec, 0, hd, back);
                        int g = d.groupSize(hd);
                        for (int i = 0; i < hd; i++) {
                            float amax = 0;
                            for (int j = i / g * g; j < i / g * g + g; j++) {
                                amax = Math.max(amax, Math.abs(v[j]));
                            }
                            float bound = switch (d) {
                                case BF16 -> 0f;
                                case FP8 -> Math.max(Math.abs(v[i]) / 16, amax / 448 * 0x1p-9f) * 1.01f; // 3 mantissa bits; the subnormal step
                                case Q8 -> amax / 127 / 2 * 1.01f * 2; // half a step of a scale rounded up to bf16 (at most 2x amax / 127)
                                case Q4 -> amax / 7 / 2 * 1.01f * 2;
                            };
                            assertTrue(Math.abs(back[i] - v[i]) <= bound, d + " hd " + hd + " [" + i + "]: " + v[i] + " -> " + back[i]);
                        }
                        if (d == KvDtype.BF16) {
                            assertArrayEquals(v, back);
                        }
                    }
                }
            }
        }
    }

    /** The stores' bytes a token: fp8 about half of bf16's, q4 under 0.29 of it (the capacity targets: 1.95x and 3.5x). */
    @Test
    void capacityAgainstBf16() {
        long bf16 = CpuKvStore.bytesPerToken(52, 8, 128, KvDtype.BF16);
        assertEquals(52L * 2 * 8 * 256, bf16);
        assertTrue(bf16 / (double) CpuKvStore.bytesPerToken(52, 8, 128, KvDtype.FP8) >= 1.95);
        assertTrue(bf16 / (double) CpuKvStore.bytesPerToken(52, 8, 128, KvDtype.Q8) >= 1.85);
        assertTrue(bf16 / (double) CpuKvStore.bytesPerToken(52, 8, 128, KvDtype.Q4) >= 3.5);
    }

    @Test
    void namesParseAndHeadDimsThatDoNotSplitAreRefused() {
        assertEquals(KvDtype.Q4, KvDtype.parse("Q4"));
        assertThrows(IllegalArgumentException.class, () -> KvDtype.parse("int3"));
        assertThrows(IllegalArgumentException.class, () -> new CpuKvStore(4, 1, 16, 2, 48, KvDtype.Q8));
    }
}

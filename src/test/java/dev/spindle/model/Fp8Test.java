package dev.spindle.model;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class Fp8Test {
    @Test
    void knownValues() {
        assertEquals(448f, Fp8.decode((byte) 0x7E));
        assertEquals(-448f, Fp8.decode((byte) 0xFE));
        assertEquals(1f, Fp8.decode((byte) 0x38));
        assertEquals(0x1p-9f, Fp8.decode((byte) 0x01));
        assertEquals(0x1p-6f, Fp8.decode((byte) 0x08));
        assertTrue(Float.isNaN(Fp8.decode((byte) 0x7F)));
        assertEquals(0f, Fp8.decode((byte) 0x00));
    }

    @Test
    void everyCodeRoundTrips() {
        for (int b = 0; b < 256; b++) {
            float v = Fp8.decode((byte) b);
            if (Float.isNaN(v) || b == 0x80) {
                continue; // NaN; -0 encodes as -0 too, checked by sign below
            }
            assertEquals(b, Fp8.encode(v) & 0xFF, "code " + Integer.toHexString(b) + " = " + v);
        }
        assertEquals(0x80, Fp8.encode(-0f) & 0xFF);
    }

    /** encode is the nearest finite value, ties to the even code, checked against a search of the whole table. */
    @Test
    void encodeIsTheNearestCodeTiesToEven() {
        SplittableRandom rnd = new SplittableRandom(51);
        for (int i = 0; i < 200_000; i++) {
            float f = switch (i % 4) {
                case 0 -> (float) (rnd.nextDouble(-500, 500));
                case 1 -> (float) (rnd.nextGaussian() * 0.02);
                case 2 -> midpoint(rnd.nextInt(0, 0x7E)) * (rnd.nextBoolean() ? 1 : -1); // exact ties
                default -> (float) (rnd.nextGaussian() * 1e-3);
            };
            assertEquals(nearest(f), Fp8.encode(f) & 0xFF, "f = " + f);
        }
    }

    private static float midpoint(int code) {
        return (Fp8.decode((byte) code) + Fp8.decode((byte) (code + 1))) / 2;
    }

    private static int nearest(float f) {
        float a = Math.min(Math.abs(f), Fp8.MAX);
        int best = 0;
        for (int c = 1; c <= 0x7E; c++) {
            float d = Math.abs(Fp8.decode((byte) c) - a), bd = Math.abs(Fp8.decode((byte) best) - a);
            if (d < bd || (d == bd && (c & 1) == 0)) {
                best = c;
            }
        }
        return (f < 0 || (f == 0 && 1 / f < 0) ? 0x80 : 0) | best;
    }
}

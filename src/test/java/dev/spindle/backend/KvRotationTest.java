package dev.spindle.backend;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class KvRotationTest {
    /** R is orthonormal: R^T R x = x and (R q) . (R k) = q . k, to fp32 rounding. */
    @Test
    void rotatingKeepsLengthsAndDotProducts() {
        SplittableRandom rnd = new SplittableRandom(54);
        for (int n : new int[]{16, 32, 128}) {
            KvRotation r = new KvRotation(n);
            for (int t = 0; t < 100; t++) {
                float[] q = new float[n], k = new float[n], rq = new float[n], rk = new float[n];
                for (int i = 0; i < n; i++) {
                    q[i] = (float) rnd.nextGaussian();
                    k[i] = (float) rnd.nextGaussian() * (i == 3 ? 20 : 1);
                }
                r.rotate(q, 0, rq);
                r.rotate(k, 0, rk);
                double dot = 0, rdot = 0;
                for (int i = 0; i < n; i++) {
                    dot += q[i] * k[i];
                    rdot += rq[i] * rk[i];
                }
                assertEquals(dot, rdot, 1e-4 * (1 + Math.abs(dot)));
                r.unrotate(rk);
                for (int i = 0; i < n; i++) {
                    assertEquals(k[i], rk[i], 1e-5 * (1 + Math.abs(k[i])));
                }
            }
        }
        assertThrows(IllegalArgumentException.class, () -> new KvRotation(48));
    }
}

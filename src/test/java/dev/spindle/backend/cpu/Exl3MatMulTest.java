package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Exl3Fixtures;
import dev.spindle.model.Exl3Matrix;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.SafetensorsFile;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The CPU linear layer over EXL3 weights ({@link Exl3MatMul}): y = x W with W = diag(su) H Ŵ H diag(sv), against the fixture
 * script's float64 effective weight; a row's result the same in any window; a column-parallel share of 128 rows the same
 * rows of the whole; row-parallel partials over 128-aligned input slices summing to the whole.
 */
class Exl3MatMulTest {

    @Test
    void computesTheLayerTheFormatDefines() {
        for (String fixture : Exl3Fixtures.FIXTURES) {
            try (LoadedModel q = ModelLoader.load(Exl3Fixtures.model(fixture), LoadFormat.SAFETENSORS, LoadListener.NONE);
                 Arena arena = Arena.ofConfined(); Parallel p = new Parallel(2)) {
                SafetensorsFile ref = SafetensorsFile.open(Exl3Fixtures.reference(fixture), arena);
                Exl3Matrix[] weights = Exl3Fixtures.referenced(q);
                for (int w = 0; w < 2; w++) {
                    Exl3Matrix m = weights[w];
                    int n = 3;
                    float[] x = Fp8MatMulTest.rows(n, m.cols(), 7 + w), y = new float[n * m.rows()];
                    new MatMul(p).apply(x, n, m, y);
                    Exl3Fixtures.assertEffectiveProduct(ref, Exl3Fixtures.NAMES[w], m, x, n, y, fixture);
                    // each row alone gives the bits it gave in the window of three
                    for (int r = 0; r < n; r++) {
                        float[] one = new float[m.rows()];
                        new MatMul(p).apply(Arrays.copyOfRange(x, r * m.cols(), (r + 1) * m.cols()), 1, m, one);
                        assertArrayEquals(Arrays.copyOfRange(y, r * m.rows(), (r + 1) * m.rows()), one, fixture + " row " + r + " alone");
                    }
                }
            }
        }
    }

    @Test
    void sharesAndPartialsAgreeWithTheWhole() {
        try (LoadedModel q = ModelLoader.load(Exl3Fixtures.model("mul1"), LoadFormat.SAFETENSORS, LoadListener.NONE);
             Parallel p = new Parallel(2)) {
            Exl3Matrix up = (Exl3Matrix) q.weights().layers().get(1).up(); // 320 x 128: shares [0, 128), [128, 256), [256, 320)
            Exl3Matrix down = (Exl3Matrix) q.weights().layers().get(1).down(); // 128 x 320: input slices [0, 128), [128, 320)
            MatMul mm = new MatMul(p);
            float[] x = Fp8MatMulTest.rows(2, up.cols(), 11), whole = new float[2 * up.rows()];
            mm.apply(x, 2, up, whole);
            for (int[] s : new int[][]{{0, 128}, {128, 128}, {256, 64}}) {
                float[] part = new float[2 * s[1]];
                mm.apply(x, 2, up.rows(s[0], s[1]), part);
                for (int r = 0; r < 2; r++) {
                    assertArrayEquals(Arrays.copyOfRange(whole, r * up.rows() + s[0], r * up.rows() + s[0] + s[1]),
                            Arrays.copyOfRange(part, r * s[1], (r + 1) * s[1]), "rows " + s[0] + "+" + s[1]);
                }
            }
            assertThrows(IllegalArgumentException.class, () -> up.rows(64, 128));
            float[] xd = Fp8MatMulTest.rows(2, down.cols(), 12), wholeDown = new float[2 * down.rows()];
            mm.apply(xd, 2, down, wholeDown);
            float[] sum = new float[2 * down.rows()];
            for (int[] s : new int[][]{{0, 128}, {128, 192}}) {
                float[] slice = new float[2 * s[1]], partial = new float[2 * down.rows()];
                for (int r = 0; r < 2; r++) {
                    System.arraycopy(xd, r * down.cols() + s[0], slice, r * s[1], s[1]);
                }
                mm.applyColumns(slice, 2, down, s[0], s[1], partial, false);
                for (int i = 0; i < sum.length; i++) {
                    sum[i] += partial[i];
                }
            }
            for (int i = 0; i < sum.length; i++) {
                assertEquals(wholeDown[i], Bf16.round(sum[i]), Math.abs(wholeDown[i]) / 128 + 1e-3, "partials " + i);
            }
            assertThrows(IllegalArgumentException.class, () -> mm.applyColumns(new float[2 * 64], 2, down, 64, 64, new float[2 * 128], false));
        }
    }

}

package dev.spindle.model;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The EXL3 fixtures (scripts/make_exl3_fixture.py) and their reference values, shared by the CPU and CUDA tests: each
 * fixture's reference file holds, for layer 0's q_proj and layer 2's down_proj, the decoded Ŵ and the effective weight.
 */
public final class Exl3Fixtures {
    public static final Path DIR = Path.of("src/test/resources/fixtures/exl3");
    public static final String[] FIXTURES = {"mul1", "mixed-mcg", "3inst"};
    /** The weights the reference files hold. */
    public static final String[] NAMES = {"model.layers.0.self_attn.q_proj.weight", "model.layers.2.mlp.down_proj.weight"};
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Exl3Fixtures() {
    }

    public static Path model(String fixture) {
        return DIR.resolve("llama-gqa-" + fixture);
    }

    public static Path reference(String fixture) {
        return DIR.resolve("llama-gqa-" + fixture + ".reference.safetensors");
    }

    /** The weights {@link #NAMES} names, in that order. */
    public static Exl3Matrix[] referenced(LoadedModel q) {
        return new Exl3Matrix[]{(Exl3Matrix) q.weights().layers().getFirst().q(), (Exl3Matrix) q.weights().layers().get(2).down()};
    }

    /**
     * y (n, m.rows()) is x (n, m.cols()) times the effective weight {@code name} of {@code ref}, computed in double, within one
     * bf16 rounding of the output (2^-9 relative) and fp32 sums in the transforms and the product.
     */
    public static void assertEffectiveProduct(SafetensorsFile ref, String name, Exl3Matrix m, float[] x, int n, float[] y, String what) {
        var eff = ref.bytes(ref.tensors().get(name + ".effective"));
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < m.rows(); j++) {
                double want = 0, magnitude = 0;
                for (int i = 0; i < m.cols(); i++) {
                    double e = eff.getAtIndex(F32, (long) j * m.cols() + i);
                    want += e * x[r * m.cols() + i];
                    magnitude += Math.abs(e * x[r * m.cols() + i]);
                }
                assertEquals(want, y[r * m.rows() + j], Math.abs(want) / 256 + magnitude * 2e-6, what + " " + name + " (" + r + ", " + j + ")");
            }
        }
    }
}

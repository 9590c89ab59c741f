package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.model.Exl3Matrix;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.SafetensorsFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The EXL3 kernels (exl3.cu) on the EXL3 fixtures: the layer y = x W against the fixture script's float64 effective weight
 * (within one bf16 rounding and fp32 sums, the CPU reference's bound), for 1 to 11 rows, and every row of a batch the same
 * bits as that row alone.
 */
@RequiresGpu
class Exl3ContractTest {
    static CudaKernels k;
    static CudaDriver cuda;
    private static final Path DIR = Path.of("src/test/resources/fixtures/exl3");
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @BeforeAll
    static void gpu() {
        k = RequiresGpu.Kernels.load();
        cuda = k.driver();
    }

    private long upload(MemorySegment host) {
        long d = cuda.alloc(host.byteSize());
        cuda.copyToDevice(d, host);
        return d;
    }

    private float[] run(Exl3Kernels.Weights w, float[] x, int n, Arena a) {
        Exl3Matrix m = w.host();
        MemorySegment hx = a.allocate(2L * n * m.cols());
        for (int i = 0; i < n * m.cols(); i++) {
            hx.setAtIndex(KernelContractTest.BF16, i, Bf16.fromFloat(x[i]));
        }
        long dx = upload(hx), dy = cuda.alloc(2L * n * m.rows());
        long xh = cuda.alloc(4L * n * Exl3Matrix.pad(m.cols())), yh = cuda.alloc(4L * n * Exl3Matrix.pad(m.rows()));
        k.exl3().linear(dx, m.cols(), n, w, 0, m.cols(), dy, xh, yh);
        cuda.sync();
        MemorySegment hy = a.allocate(2L * n * m.rows());
        cuda.copyToHost(hy, dy);
        float[] y = new float[n * m.rows()];
        for (int i = 0; i < y.length; i++) {
            y[i] = Bf16.toFloat(hy.getAtIndex(KernelContractTest.BF16, i));
        }
        for (long p : new long[]{dx, dy, xh, yh}) {
            cuda.free(p);
        }
        return y;
    }

    @Test
    void theLayerIsTheEffectiveWeightsProductAndRowsAreTheirOwn() {
        for (String fixture : new String[]{"mul1", "mixed-mcg", "3inst"}) {
            try (LoadedModel q = ModelLoader.load(DIR.resolve("llama-gqa-" + fixture), LoadFormat.SAFETENSORS, LoadListener.NONE);
                 Arena a = Arena.ofConfined()) {
                SafetensorsFile ref = SafetensorsFile.open(DIR.resolve("llama-gqa-" + fixture + ".reference.safetensors"), a);
                Exl3Matrix[] ms = {(Exl3Matrix) q.weights().layers().getFirst().q(), (Exl3Matrix) q.weights().layers().get(2).down()};
                String[] names = {"model.layers.0.self_attn.q_proj.weight", "model.layers.2.mlp.down_proj.weight"};
                for (int wi = 0; wi < 2; wi++) {
                    Exl3Matrix m = ms[wi];
                    Exl3Kernels.Weights w = new Exl3Kernels.Weights(upload(m.trellis().data()), upload(m.su().data()), upload(m.sv().data()), m);
                    var eff = ref.bytes(ref.tensors().get(names[wi] + ".effective"));
                    for (int n : new int[]{1, 3, 8, 11}) {
                        Random rnd = new Random(31 + n);
                        float[] x = new float[n * m.cols()];
                        for (int i = 0; i < x.length; i++) {
                            x[i] = Bf16.round((float) rnd.nextGaussian());
                        }
                        float[] y = run(w, x, n, a);
                        for (int r = 0; r < n; r++) {
                            for (int j = 0; j < m.rows(); j++) {
                                double want = 0, magnitude = 0;
                                for (int i = 0; i < m.cols(); i++) {
                                    double e = eff.getAtIndex(F32, (long) j * m.cols() + i);
                                    want += e * x[r * m.cols() + i];
                                    magnitude += Math.abs(e * x[r * m.cols() + i]);
                                }
                                assertEquals(want, y[r * m.rows() + j], Math.abs(want) / 256 + magnitude * 2e-6, fixture + " " + names[wi] + " n " + n
                                        + " (" + r + ", " + j + ")");
                            }
                            float[] alone = run(w, java.util.Arrays.copyOfRange(x, r * m.cols(), (r + 1) * m.cols()), 1, a);
                            org.junit.jupiter.api.Assertions.assertArrayEquals(alone, java.util.Arrays.copyOfRange(y, r * m.rows(), (r + 1) * m.rows()),
                                    fixture + " " + names[wi] + ": row " + r + " of " + n + " alone");
                        }
                    }
                    cuda.free(w.trellis());
                    cuda.free(w.su());
                    cuda.free(w.sv());
                    System.out.printf("[cuda] exl3 %s %s (%d bits): the effective weight's product at 1 to 11 rows, each row its own%n", fixture,
                            names[wi], m.bits());
                }
            }
        }
    }
}

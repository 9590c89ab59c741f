package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.model.Exl3Fixtures;
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
import java.util.Random;


/**
 * The EXL3 kernels (exl3.cu) on the EXL3 fixtures: the layer y = x W against the fixture script's float64 effective weight
 * (within one bf16 rounding and fp32 sums, the CPU reference's bound), for 1 to 11 rows, and every row of a batch the same
 * bits as that row alone.
 */
@RequiresGpu
class Exl3ContractTest {
    @org.junit.jupiter.api.BeforeAll
    static void fixturesPresent() {
        RequiresGpu.Kernels.assumeFixtures(dev.spindle.model.Exl3Fixtures.DIR);
    }

    static CudaKernels k;
    static CudaDriver cuda;

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
        Exl3Kernels.Weights m = w;
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
        for (String fixture : Exl3Fixtures.FIXTURES) {
            try (LoadedModel q = ModelLoader.load(Exl3Fixtures.model(fixture), LoadFormat.SAFETENSORS, LoadListener.NONE);
                 Arena a = Arena.ofConfined()) {
                SafetensorsFile ref = SafetensorsFile.open(Exl3Fixtures.reference(fixture), a);
                Exl3Matrix[] ms = Exl3Fixtures.referenced(q);
                for (int wi = 0; wi < 2; wi++) {
                    Exl3Matrix m = ms[wi];
                    String name = Exl3Fixtures.NAMES[wi];
                    Exl3Kernels.Weights w = Exl3Kernels.Weights.of(upload(m.trellis().data()), upload(m.su().data()), upload(m.sv().data()), m);
                    for (int n : new int[]{1, 3, 8, 11}) {
                        Random rnd = new Random(31 + n);
                        float[] x = new float[n * m.cols()];
                        for (int i = 0; i < x.length; i++) {
                            x[i] = Bf16.round((float) rnd.nextGaussian());
                        }
                        float[] y = run(w, x, n, a);
                        Exl3Fixtures.assertEffectiveProduct(ref, name, m, x, n, y, fixture + " n " + n);
                        for (int r = 0; r < n; r++) {
                            float[] alone = run(w, java.util.Arrays.copyOfRange(x, r * m.cols(), (r + 1) * m.cols()), 1, a);
                            org.junit.jupiter.api.Assertions.assertArrayEquals(alone, java.util.Arrays.copyOfRange(y, r * m.rows(), (r + 1) * m.rows()),
                                    fixture + " " + name + ": row " + r + " of " + n + " alone");
                        }
                    }
                    cuda.free(w.trellis());
                    cuda.free(w.su());
                    cuda.free(w.sv());
                    System.out.printf("[cuda] exl3 %s %s (%d bits): the effective weight's product at 1 to 11 rows, each row its own%n", fixture,
                            name, m.bits());
                }
            }
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.model.Bf16;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.HostReads;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.Matrix;
import dev.spindle.model.MlxMatrix;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Nvfp4Matrix;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The formats the CUDA backend reads by expanding them to bf16 (expand.cu: ggml blocks of GGUF files, MLX affine, NVFP4):
 * every quantized matrix of every fixture expanded on the device equals the CPU's expansion bit for bit; each fixture model
 * served on CUDA is as close to the CPU reference as its bf16 twin is, with the invariants (decode steps equal a window's
 * rows, a batch equals each row alone).
 */
@RequiresGpu
class CudaExpandedFormatsTest {
    @org.junit.jupiter.api.BeforeAll
    static void fixturesPresent() {
        RequiresGpu.Kernels.assumeFixtures(FIXTURES.resolve("gguf"));
    }

    private static final Path FIXTURES = Path.of("src/test/resources/fixtures");

    /** The fixture models, each with its bf16 twin (the same weights unquantized). */
    static List<Path[]> models() {
        List<Path[]> all = new ArrayList<>();
        Path gqa = FIXTURES.resolve("llama-gqa"), kquant = FIXTURES.resolve("gguf/llama-kquant-bf16.gguf");
        for (String t : new String[]{"q8_0", "q4_0"}) {
            all.add(new Path[]{FIXTURES.resolve("gguf/llama-gqa-" + t + ".gguf"), gqa});
        }
        for (String t : new String[]{"q8_0", "q6_k", "q5_k_m", "q4_k_m", "iq4_xs", "iq4_nl", "q3_k_m", "q2_k"}) {
            all.add(new Path[]{FIXTURES.resolve("gguf/llama-kquant-" + t + ".gguf"), kquant});
        }
        for (String m : new String[]{"3bit", "4bit", "8bit", "mixed"}) {
            all.add(new Path[]{FIXTURES.resolve("mlx/llama-gqa-" + m), gqa});
        }
        for (String m : new String[]{"ct", "mlx", "modelopt"}) {
            all.add(new Path[]{FIXTURES.resolve("nvfp4/llama-gqa-" + m), gqa});
        }
        return all;
    }

    private static LoadedModel load(Path p) {
        return ModelLoader.load(p, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, Quantization.NONE);
    }

    /** Row i of m as the CPU's bf16 values. */
    private static float[] expandRow(Matrix m, int i) {
        float[] out = new float[m.cols()];
        switch (m) {
            case GgmlMatrix g -> g.expand(i, 0, m.cols(), out);
            case MlxMatrix a -> a.expand(i, 0, m.cols(), out);
            case Nvfp4Matrix f -> f.expand(i, 0, m.cols(), out);
            default -> throw new IllegalArgumentException(m.format());
        }
        return out;
    }

    @Test
    void everyQuantizedMatrixExpandsToTheCpusBits() {
        CudaKernels k = RequiresGpu.Kernels.load();
        CudaDriver cuda = k.driver();
        cuda.makeCurrent();
        {
            int checked = 0;
            for (Path[] pair : models()) {
                try (LoadedModel m = load(pair[0]); Arena a = Arena.ofConfined(); CudaWeights w = CudaWeights.upload(cuda, m.config(), m.weights(), LoadListener.NONE)) {
                    List<DeviceMatrix> device = new ArrayList<>();
                    List<List<Matrix>> host = new ArrayList<>();
                    for (int l = 0; l < m.config().numLayers(); l++) {
                        LayerWeights lw = m.weights().layers().get(l);
                        CudaWeights.Layer dl = w.layer(l);
                        device.addAll(List.of(dl.qkv(), dl.o(), dl.gateUp(), dl.down()));
                        host.addAll(List.of(List.of(lw.q(), lw.k(), lw.v()), List.of(lw.o()), List.of(lw.gate(), lw.up()), List.of(lw.down())));
                    }
                    device.add(w.lmHead());
                    host.add(List.of(m.weights().lmHead()));
                    for (int d = 0; d < device.size(); d++) {
                        if (!(device.get(d) instanceof DeviceMatrix.Expanded e)) {
                            continue;
                        }
                        long out = cuda.alloc(e.expandedBytes());
                        int row0 = 0;
                        for (ExpandKernels.Part p : e.parts()) {
                            k.expand().expand(p, out, row0);
                            row0 += p.rows();
                        }
                        MemorySegment got = a.allocate(e.expandedBytes());
                        cuda.copyToHost(got, out);
                        cuda.free(out);
                        int row = 0;
                        for (Matrix hm : host.get(d)) {
                            for (int i = 0; i < hm.rows(); i++, row++) {
                                float[] want = expandRow(hm, i);
                                for (int j = 0; j < want.length; j++) {
                                    short g = got.getAtIndex(KernelContractTest.BF16, (long) row * e.cols() + j);
                                    if (g != Bf16.fromFloat(want[j])) {
                                        assertEquals(want[j], Bf16.toFloat(g), 0, pair[0].getFileName() + " " + hm.name() + " (" + hm.format() + ") row " + i
                                                + " column " + j);
                                    }
                                }
                            }
                        }
                        checked++;
                    }
                }
                System.out.printf("[cuda] %s: every quantized matrix expanded on the device equals the CPU's bf16 values%n", pair[0].getFileName());
            }
            assertTrue(checked > 40, "matrices checked: " + checked);
        }
    }

    private static double[] gap(LoadedModel m, int[] prompt) {
        try (CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER,
                1, KvDtype.BF16);
             CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 1024, 0.1, 256, true).withKernels(RequiresGpu.KERNELS),
                     LoadListener.NONE)) {
            return CudaFp8PassTest.compare(TestSteps.windowLogits(cpu, prompt), TestSteps.windowLogits(gpu, prompt));
        }
    }

    @Test
    void everyFixtureIsAsCloseToTheCpuAsItsBf16TwinAndKeepsTheInvariants() {
        java.util.Map<Path, double[]> twins = new java.util.HashMap<>();
        for (Path[] pair : models()) {
            try (LoadedModel m = load(pair[0])) {
                int vocab = m.config().vocabSize();
                int[] prompt = new Random(51).ints(300, 3, vocab).toArray();
                double[] bf16 = twins.computeIfAbsent(pair[1], p -> {
                    try (LoadedModel t = load(p)) {
                        return gap(t, prompt);
                    }
                });
                double[] g = gap(m, prompt);
                String label = pair[0].getFileName() + " (" + m.weights().layers().getFirst().q().format() + ")";
                System.out.printf("[cuda] %s: KL(cpu || cuda) %.3g, top-1 %.4f; its bf16 twin %.3g, %.4f%n", label, g[0], g[1], bf16[0], bf16[1]);
                assertTrue(g[0] <= Math.max(3 * bf16[0], 1e-5), label + ": CPU vs CUDA KL " + g[0] + " (bf16's " + bf16[0] + ")");
                assertTrue(g[1] >= Math.min(0.97, bf16[1]), label + ": CPU vs CUDA top-1 agreement " + g[1]);
                try (CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 1024, 0.1, 256, true).withKernels(RequiresGpu.KERNELS),
                        LoadListener.NONE)) {
                    CudaFp8PassTest.decodeStepsEqualTheWindowsRows(gpu, new Random(52).ints(700, 3, vocab).toArray(), 12, label);
                    CudaFp8PassTest.batchEqualsRowsAlone(gpu, vocab, new Random(53), label);
                }
            }
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.model.Exl3Fixtures;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CUDA pass over EXL3 weights: the three EXL3 fixtures (mul1, mixed mcg, 3inst with its 6-bit head) as close to the CPU
 * reference as the bf16 model is on the two backends, with the invariants bit for bit (decode steps equal a window's rows, a
 * batch equals each row alone); and the 3B shape with random 4-bit trellises (the bench's dummy EXL3), the same invariants.
 */
@RequiresGpu
class CudaExl3PassTest {
    @org.junit.jupiter.api.BeforeAll
    static void fixturesPresent() {
        RequiresGpu.Kernels.assumeFixtures(dev.spindle.model.Exl3Fixtures.DIR);
    }

    private static final Path BF16 = Path.of("src/test/resources/fixtures/llama-gqa");

    private static CpuForwardPass cpu(LoadedModel m) {
        return new CpuForwardPass(m.config(), m.weights(), 64, 16, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER, 1,
                KvDtype.BF16);
    }

    private static CudaOptions options() {
        return new CudaOptions(16, 1024, 0.1, 256, true).withKernels(RequiresGpu.KERNELS);
    }

    /** KL(cpu || cuda) and top-1 agreement of the model's window logits over a seeded prompt. */
    private static double[] gap(Path dir, int[] prompt) {
        try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, Quantization.NONE);
             CpuForwardPass cpu = cpu(m);
             CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), options(), LoadListener.NONE)) {
            return CudaFp8PassTest.compare(TestSteps.windowLogits(cpu, prompt), TestSteps.windowLogits(gpu, prompt));
        }
    }

    @Test
    void fixturesAreAsCloseToTheCpuReferenceAsBf16AndKeepTheInvariants() {
        int[] prompt = new Random(41).ints(300, 3, 512).toArray();
        double[] bf16 = gap(BF16, prompt);
        System.out.printf("[cuda] llama-gqa bf16: KL(cpu || cuda) %.3g, top-1 agreement %.4f%n", bf16[0], bf16[1]);
        for (String fixture : Exl3Fixtures.FIXTURES) {
            double[] g = gap(Exl3Fixtures.model(fixture), prompt);
            System.out.printf("[cuda] llama-gqa exl3 %s: KL(cpu || cuda) %.3g, top-1 agreement %.4f%n", fixture, g[0], g[1]);
            assertTrue(g[0] <= Math.max(3 * bf16[0], 1e-5), fixture + ": CPU vs CUDA KL " + g[0] + " (bf16's " + bf16[0] + ")");
            assertTrue(g[1] >= Math.min(0.97, bf16[1]), fixture + ": CPU vs CUDA top-1 agreement " + g[1]);
            try (LoadedModel m = ModelLoader.load(Exl3Fixtures.model(fixture), LoadFormat.SAFETENSORS, LoadListener.NONE);
                 CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), options(), LoadListener.NONE)) {
                assertTrue(gpu.weights().format().startsWith("exl3"), gpu.weights().format());
                String label = "exl3 " + fixture;
                CudaFp8PassTest.decodeStepsEqualTheWindowsRows(gpu, new Random(42).ints(700, 3, 512).toArray(), 70, label);
                CudaFp8PassTest.batchEqualsRowsAlone(gpu, 512, new Random(43), label);
                System.out.printf("[cuda] %s (%s): decode steps equal the window's rows (a window of 70: two row chunks); a batch of 7 equals"
                        + " each row alone%n", label, gpu.weights().format());
            }
        }
    }

    @Test
    void dummyExl3OnThe3bShapeKeepsTheInvariants() {
        try (CudaForwardPass gpu = CudaPasses.open(CudaFp8PassTest.SHAPE_3B, null, new CudaOptions(16, 4096, 0.3, 2048, true).withKernels(RequiresGpu.KERNELS), LoadListener.NONE, 0,
                DummyFormat.exl3(4))) {
            String label = "dummy exl3-4 on the 3B shape";
            assertTrue(gpu.weights().format().startsWith("exl3 (4 bits"), gpu.weights().format());
            int vocab = CudaFp8PassTest.SHAPE_3B.vocabSize();
            float[] row = TestSteps.windowLogits(gpu, new Random(44).ints(40, 3, vocab).toArray())[39];
            for (float v : row) {
                assertTrue(Float.isFinite(v), label + ": a logit is " + v);
            }
            CudaFp8PassTest.decodeStepsEqualTheWindowsRows(gpu, new Random(45).ints(1_500, 3, vocab).toArray(), 12, label);
            CudaFp8PassTest.batchEqualsRowsAlone(gpu, vocab, new Random(46), label);
            System.out.printf("[cuda] %s: finite logits; decode steps equal the window's rows; a batch of 7 equals each row alone%n", label);
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.eval.Divergence;
import dev.spindle.kv.BlockTable;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.step.ModelStep;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CUDA pass over fp8 weights: the invariants bit for bit (decode steps equal a window's rows, a batch equals each row
 * alone) on the 3B shape with weights quantized on the device, and the bundled chat model quantized at load as close to
 * the CPU reference over the same fp8 weights as the two backends are in bf16.
 */
@RequiresGpu
class CudaFp8PassTest {
    static final ModelConfig SHAPE_3B = ConfigParser.read(Path.of("models/shapes/nanbeige4.1-3b-shape/config.json"));

    private static void prefill(CudaForwardPass gpu, int[] tokens, BlockTable table) {
        for (int at = 0; at < tokens.length; at += 1024) {
            TestSteps.forward(gpu, List.of(TestSteps.window(Arrays.copyOfRange(tokens, at, Math.min(tokens.length, at + 1024)), table, false,
                    at + 1024 >= tokens.length)));
        }
    }

    @Test
    void decodeStepsAndBatchesEqualWindowsAndRowsAloneWithFp8Weights() {
        for (Quantization q : List.of(Quantization.FP8_BLOCK, Quantization.FP8_ROW)) {
            try (CudaForwardPass gpu = CudaPasses.open(SHAPE_3B, null, new CudaOptions(16, 4096, 0.3, 2048, true), LoadListener.NONE, 0, q)) {
                assertTrue(gpu.weights().format().startsWith("fp8-e4m3"), gpu.weights().format());
                int n = 1_500, tail = 12;
                int[] prompt = new Random(21).ints(n, 3, SHAPE_3B.vocabSize()).toArray();
                BlockTable stepped = new BlockTable(TestSteps.pool(gpu)), windowed = new BlockTable(TestSteps.pool(gpu));
                try {
                    prefill(gpu, Arrays.copyOf(prompt, n - 3), stepped);
                    float[][] steps = new float[3][];
                    for (int i = 0; i < 3; i++) {
                        steps[i] = TestSteps.forward(gpu, List.of(TestSteps.window(new int[]{prompt[n - 3 + i]}, stepped, false, true))).getFirst()[0];
                    }
                    prefill(gpu, Arrays.copyOf(prompt, n - tail), windowed);
                    float[][] rows = TestSteps.forward(gpu, List.of(TestSteps.window(Arrays.copyOfRange(prompt, n - tail, n), windowed, true, true)))
                            .getFirst();
                    for (int i = 0; i < 3; i++) {
                        assertArrayEquals(rows[tail - 3 + i], steps[i], q.label + ": decode step at position " + (n - 3 + i) + " differs from the window's row");
                    }
                } finally {
                    stepped.release();
                    windowed.release();
                }
                // 7 sequences decoded in one step, then each alone
                Random random = new Random(22);
                List<BlockTable> tables = new ArrayList<>();
                try {
                    int[] next = new int[7];
                    for (int i = 0; i < 7; i++) {
                        BlockTable t = new BlockTable(TestSteps.pool(gpu));
                        tables.add(t);
                        prefill(gpu, random.ints(200 + 37 * i, 3, SHAPE_3B.vocabSize()).toArray(), t);
                        next[i] = 3 + random.nextInt(SHAPE_3B.vocabSize() - 3);
                    }
                    List<ModelStep.Window> batch = new ArrayList<>();
                    for (int i = 0; i < 7; i++) {
                        batch.add(TestSteps.window(new int[]{next[i]}, tables.get(i), false, true));
                    }
                    List<float[][]> together = TestSteps.forward(gpu, batch);
                    for (int i = 0; i < 7; i++) {
                        BlockTable t = tables.get(i);
                        t.truncate(t.tokens() - 1);
                        float[] alone = TestSteps.forward(gpu, List.of(TestSteps.window(new int[]{next[i]}, t, false, true))).getFirst()[0];
                        assertArrayEquals(alone, together.get(i)[0], q.label + ": row " + i + " of a batch of 7 differs from it alone");
                    }
                } finally {
                    tables.forEach(BlockTable::release);
                }
                System.out.printf("[cuda] %s (%s) on the 3B shape: decode steps equal the window's rows; a batch of 7 equals each row alone%n",
                        q.label, gpu.weights().format());
            }
        }
    }

    /** Mean KL(a || b) over the rows and how many rows share the argmax. */
    private static double[] compare(float[][] a, float[][] b) {
        double kl = 0;
        int same = 0;
        for (int i = 0; i < a.length; i++) {
            kl += Divergence.kl(a[i], b[i]);
            same += Divergence.argmax(a[i]) == Divergence.argmax(b[i]) ? 1 : 0;
        }
        return new double[]{kl / a.length, same / (double) a.length};
    }

    @Test
    void bundledModelInFp8IsAsCloseToTheCpuReferenceAsInBf16() {
        Path dir = Path.of("models/spindle-chat-target");
        int[] prompt = new Random(23).ints(300, 3, 4000).toArray();
        double[][] gaps = new double[2][];
        for (Quantization q : List.of(Quantization.NONE, Quantization.FP8_BLOCK)) {
            try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, q);
                 CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER);
                 CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 1024, 0.1, 256, true), LoadListener.NONE)) {
                float[][] want = logits(cpu, prompt), got = logits(gpu, prompt);
                gaps[q == Quantization.NONE ? 0 : 1] = compare(want, got);
                System.out.printf("[cuda] bundled chat model, %s: KL(cpu || cuda) mean %.3g, top-1 agreement %.4f over %d positions%n",
                        m.weights().layers().getFirst().q().format(), gaps[q == Quantization.NONE ? 0 : 1][0], gaps[q == Quantization.NONE ? 0 : 1][1], prompt.length);
            }
        }
        assertTrue(gaps[1][0] <= Math.max(3 * gaps[0][0], 1e-5), "fp8 CPU vs CUDA KL " + gaps[1][0] + " against bf16's " + gaps[0][0]);
        assertTrue(gaps[1][1] >= 0.97, "fp8 CPU vs CUDA top-1 agreement " + gaps[1][1]);
    }

    private static float[][] logits(dev.spindle.step.ForwardPass pass, int[] prompt) {
        BlockTable t = new BlockTable(TestSteps.pool(pass));
        try {
            return TestSteps.forward(pass, List.of(TestSteps.window(prompt, t, true, true))).getFirst();
        } finally {
            t.release();
        }
    }
}

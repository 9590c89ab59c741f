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
import dev.spindle.step.KvDtype;
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
 * The CUDA pass over fp8 weights and an fp8 KV cache: the invariants bit for bit (decode steps equal a window's rows, also
 * past 16K keys; a batch equals each row alone) on the 3B shape with weights quantized on the device, and the bundled chat
 * model as close to the CPU reference of the same configuration as the two backends are in bf16.
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

    /** The lossy configurations: fp8 weights (both layouts), an fp8 KV cache, and both. */
    static List<Object[]> configurations() {
        return List.of(new Object[]{Quantization.FP8_BLOCK, KvDtype.BF16}, new Object[]{Quantization.FP8_ROW, KvDtype.BF16},
                new Object[]{Quantization.NONE, KvDtype.FP8}, new Object[]{Quantization.FP8_BLOCK, KvDtype.FP8});
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.MethodSource("configurations")
    void decodeStepsAndBatchesEqualWindowsAndRowsAlone(Quantization q, KvDtype kv) {
        String label = q.label + " weights, " + kv.label + " KV";
        try (CudaForwardPass gpu = CudaPasses.open(SHAPE_3B, null, new CudaOptions(16, 4096, 0.3, 2048, true).withKernels(RequiresGpu.KERNELS).withKvDtype(kv), LoadListener.NONE, 0, q)) {
            assertTrue(q == Quantization.NONE || gpu.weights().format().startsWith("fp8-e4m3"), gpu.weights().format());
            assertTrue(gpu.kvCapacity().dtype() == kv, label);
            decodeStepsEqualTheWindowsRows(gpu, new Random(21).ints(1_500, 3, SHAPE_3B.vocabSize()).toArray(), 12, label);
            batchEqualsRowsAlone(gpu, SHAPE_3B.vocabSize(), new Random(22), label);
            System.out.printf("[cuda] %s (%s) on the 3B shape: decode steps equal the window's rows; a batch of 7 equals each row alone%n",
                    label, gpu.weights().format());
        }
    }

    /**
     * An fp8 KV cache past 16K keys (larger splits; decode steps in split CTAs and the merge, the window's rows walking every
     * split in the prefill kernel): decode steps equal the window's rows. The 3B shape, a 20K context.
     */
    @Test
    void fp8KvDecodeStepsPastSixteenKEqualAWindow() {
        try (CudaForwardPass gpu = CudaPasses.open(SHAPE_3B, null, new CudaOptions(16, 8192, 0.3, 4096, true).withKernels(RequiresGpu.KERNELS).withKvDtype(KvDtype.FP8), LoadListener.NONE)) {
            decodeStepsEqualTheWindowsRows(gpu, new Random(25).ints(20_003, 3, SHAPE_3B.vocabSize()).toArray(), 19, "fp8 KV");
            System.out.println("[cuda] fp8 KV at 20K keys: decode steps equal the window's rows");
        }
    }

    /** 7 sequences (prompts of 200 to 422 tokens) decoded in one step, then each alone: the same bits. */
    static void batchEqualsRowsAlone(CudaForwardPass gpu, int vocab, Random random, String label) {
        List<BlockTable> tables = new ArrayList<>();
        try {
            int[] next = new int[7];
            for (int i = 0; i < 7; i++) {
                BlockTable t = new BlockTable(TestSteps.pool(gpu));
                tables.add(t);
                prefill(gpu, random.ints(200 + 37 * i, 3, vocab).toArray(), t);
                next[i] = 3 + random.nextInt(vocab - 3);
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
                assertArrayEquals(alone, together.get(i)[0], label + ": row " + i + " of a batch of 7 differs from it alone");
            }
        } finally {
            tables.forEach(BlockTable::release);
        }
    }

    /**
     * The prompt's last 3 tokens decoded one a step after the rest give, bit for bit, the last 3 rows of a window of its
     * last {@code tail} tokens (each on its own table).
     */
    static void decodeStepsEqualTheWindowsRows(CudaForwardPass gpu, int[] prompt, int tail, String label) {
        int n = prompt.length;
        BlockTable stepped = new BlockTable(TestSteps.pool(gpu)), windowed = new BlockTable(TestSteps.pool(gpu));
        try {
            prefill(gpu, Arrays.copyOf(prompt, n - 3), stepped);
            float[][] steps = new float[3][];
            for (int i = 0; i < 3; i++) {
                steps[i] = TestSteps.forward(gpu, List.of(TestSteps.window(new int[]{prompt[n - 3 + i]}, stepped, false, true))).getFirst()[0];
            }
            prefill(gpu, Arrays.copyOf(prompt, n - tail), windowed);
            float[][] rows = TestSteps.forward(gpu, List.of(TestSteps.window(Arrays.copyOfRange(prompt, n - tail, n), windowed, true, true))).getFirst();
            for (int i = 0; i < 3; i++) {
                assertArrayEquals(rows[tail - 3 + i], steps[i], label + ": decode step at position " + (n - 3 + i) + " differs from the window's row");
            }
        } finally {
            stepped.release();
            windowed.release();
        }
    }

    /** Mean KL(a || b) over the rows and how many rows share the argmax. */
    static double[] compare(float[][] a, float[][] b) {
        double kl = 0;
        int same = 0;
        for (int i = 0; i < a.length; i++) {
            kl += Divergence.kl(a[i], b[i]);
            same += Divergence.argmax(a[i]) == Divergence.argmax(b[i]) ? 1 : 0;
        }
        return new double[]{kl / a.length, same / (double) a.length};
    }

    /**
     * The bundled chat model with fp8 weights (quantized at load), an fp8 KV cache, and both: on each backend, the KL of the
     * configuration against that backend's bf16 logits; the CUDA figure within 25% of the CPU's (the KL the start log and
     * /v1/models disclose is measured on the CPU: it holds on CUDA); the two backends' logits of the configuration as close
     * as in bf16 (3x) or within 15% of the configuration's own KL (an fp8 KV cache rounds K and V to 16 steps a binade, so an
     * ulp between the backends' K moves a code now and then: the gap grows with the format's error, not past it).
     */
    @Test
    void bundledModelIsAsCloseToTheCpuReferenceInEveryFormatAsInBf16() {
        Path dir = Path.of("models/spindle-chat-target");
        int[] prompt = new Random(23).ints(300, 3, 4000).toArray();
        List<Object[]> all = new ArrayList<>();
        all.add(new Object[]{Quantization.NONE, KvDtype.BF16});
        all.addAll(configurations());
        float[][] cpu0 = null, gpu0 = null;
        double[] bf16 = null;
        for (Object[] cfg : all) {
            Quantization q = (Quantization) cfg[0];
            KvDtype kv = (KvDtype) cfg[1];
            try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, q);
                 CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, Runtime.getRuntime().availableProcessors(),
                         KvSlots.PER_EXECUTED_LAYER, 1, kv);
                 CudaForwardPass gpu = CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 1024, 0.1, 256, true).withKernels(RequiresGpu.KERNELS).withKvDtype(kv), LoadListener.NONE)) {
                float[][] onCpu = logits(cpu, prompt), onGpu = logits(gpu, prompt);
                double[] gap = compare(onCpu, onGpu);
                if (bf16 == null) {
                    cpu0 = onCpu;
                    gpu0 = onGpu;
                    bf16 = gap;
                    System.out.printf("[cuda] bundled chat model, bf16: KL(cpu || cuda) %.3g, top-1 agreement %.4f over %d positions%n", gap[0], gap[1],
                            prompt.length);
                    continue;
                }
                double klCpu = compare(cpu0, onCpu)[0], klGpu = compare(gpu0, onGpu)[0];
                String label = q.label + " weights, " + kv.label + " KV";
                System.out.printf("[cuda] bundled chat model, %s: KL against bf16 on the CPU %.3g, on CUDA %.3g; KL(cpu || cuda) %.3g, top-1 agreement %.4f%n",
                        label, klCpu, klGpu, gap[0], gap[1]);
                assertTrue(Math.abs(klGpu / klCpu - 1) <= 0.25, label + ": KL against bf16 " + klGpu + " on CUDA, " + klCpu + " on the CPU");
                assertTrue(gap[0] <= Math.max(3 * bf16[0], 0.15 * klCpu), label + ": CPU vs CUDA KL " + gap[0] + " (bf16's " + bf16[0] + ")");
                assertTrue(gap[1] >= 0.95, label + ": CPU vs CUDA top-1 agreement " + gap[1]);
            }
        }
    }

    private static float[][] logits(dev.spindle.step.ForwardPass pass, int[] prompt) {
        return TestSteps.windowLogits(pass, prompt);
    }
}

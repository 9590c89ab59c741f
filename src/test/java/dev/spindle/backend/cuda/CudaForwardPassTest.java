package dev.spindle.backend.cuda;

import dev.spindle.Fixture;
import dev.spindle.backend.ModelStep.Window;
import dev.spindle.backend.cpu.HfParityTest;
import dev.spindle.engine.kv.BlockTable;
import dev.spindle.engine.sample.Sampler;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The GPU forward pass: parity with HF on the committed fixtures (the CPU backend's
 * thresholds), and the invariants bit for bit on a model with the 33B's head layout
 * (128-dim heads, 7 query heads per KV head) and on a looped one: one-row decode steps
 * equal a prefill window, uneven windows (a resumed prompt) equal one window, a request
 * in a batch of 1, 7 or 64 gives the same logits, and two runs agree.
 */
@RequiresGpu
class CudaForwardPassTest {
    static final CudaForwardPass.Options OPTIONS = new CudaForwardPass.Options(16, 2048, 0.2, 4096, true);

    static List<String> fixtures() {
        return Fixture.NAMES;
    }

    static CudaForwardPass open(Fixture f) {
        return CudaForwardPass.open(f.model.config(), f.model.weights(), OPTIONS, LoadListener.NONE);
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void teacherForcedLogitsMatchHf(String name) {
        try (Fixture f = new Fixture(name); CudaForwardPass gpu = open(f)) {
            HfParityTest.Parity p = HfParityTest.Parity.teacherForced(f, gpu, false);
            HfParityTest.Parity rows = HfParityTest.Parity.teacherForced(f, gpu, true);
            System.out.printf("[cuda parity] %s: teacher-forced KL(HF bf16 || Spindle CUDA) = %.3e nats, top-1 %.4f over %d positions;"
                    + " KL(HF fp32 || CUDA) = %.3e; HF bf16 vs fp32 %.3e; decode steps: KL %.3e%n",
                    name, p.klBf16(), p.top1(), p.positions(), p.klF32(), p.klHfBf16VsF32(), rows.klBf16());
            assertTrue(p.klBf16() <= HfParityTest.MAX_KL, name + ": KL " + p.klBf16());
            assertTrue(p.top1() >= HfParityTest.MIN_TOP1, name + ": top-1 " + p.top1());
            assertTrue(rows.klBf16() == p.klBf16(), name + ": decode steps give other logits than the window");
        }
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void greedyContinuationMatchesHf(String name) {
        try (Fixture f = new Fixture(name); CudaForwardPass gpu = open(f)) {
            HfParityTest.checkGreedy(f, gpu, name + " (cuda)");
        }
    }

    /**
     * A ~0.94B-parameter random llama (128-dim heads, GQA 4, 32K vocabulary; prompts of 64, 300 and
     * 700 tokens over several attention splits), too large to commit: built on the GPU machine by
     * {@code scripts/make_fixtures.py target/large-fixture --large}, skipped where it is absent.
     * On this model no implementation reaches the small fixtures' absolute gate (KL 1e-4, top-1 0.99):
     * 18 layers amplify rounding noise until HF's own bf16 and fp32 runs differ by KL 2.7e-4 and on
     * 3% of top-1s, and torch's GEMM algorithms (not ours) set the bits of HF's reference. So the
     * gate here is the CPU reference's own distance on the same fixture, measured in the same run:
     * CUDA within 10% of its KL and half a point of its top-1 (or inside the absolute gate). The greedy
     * rule holds on its decisive tokens, but a random model of this depth has few (8 of 96 on the H200);
     * the bundled chat model's 231 decisive tokens carry the greedy check.
     */
    @org.junit.jupiter.api.Test
    void largeRandomModelMatchesHfAsCloselyAsTheCpuReference() {
        Path dir = Path.of("target/large-fixture/llama-1b");
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isDirectory(dir),
                "no " + dir + " (built on the GPU machine by scripts/make_fixtures.py target/large-fixture --large)");
        try (Fixture f = new Fixture("llama-1b", dir)) {
            HfParityTest.Parity cpu;
            try (dev.spindle.backend.cpu.CpuForwardPass reference = f.cpu()) {
                cpu = HfParityTest.Parity.teacherForced(f, reference, false);
            }
            int agree = 0, n = 0;
            for (int i = 0; i < f.prompts.size(); i++) {
                float[][] hf = f.matrix("logits_bf16_" + i), hf32 = f.matrix("logits_f32_" + i);
                for (int r = 0; r < hf.length; r++, n++) {
                    agree += Sampler.argmax(hf[r]) == Sampler.argmax(hf32[r]) ? 1 : 0;
                }
            }
            try (CudaForwardPass gpu = open(f)) {
                HfParityTest.Parity p = HfParityTest.Parity.teacherForced(f, gpu, false);
                System.out.printf("[cuda parity] llama-1b (%,d parameters), %d positions: KL(HF bf16 || Spindle CUDA) = %.3e nats, top-1 %.4f;"
                        + " the CPU reference: KL %.3e, top-1 %.4f; HF fp32 against HF bf16: KL %.3e, top-1 %.4f%n",
                        f.model.config().parameterCount(), p.positions(), p.klBf16(), p.top1(), cpu.klBf16(), cpu.top1(), p.klHfBf16VsF32(),
                        (double) agree / n);
                assertTrue(p.klBf16() <= Math.max(HfParityTest.MAX_KL, 1.1 * cpu.klBf16()), "llama-1b: KL " + p.klBf16() + ", CPU " + cpu.klBf16());
                assertTrue(p.top1() >= Math.min(HfParityTest.MIN_TOP1, cpu.top1() - 0.005), "llama-1b: top-1 " + p.top1() + ", CPU " + cpu.top1());
                HfParityTest.checkGreedy(f, gpu, "llama-1b (cuda)", 1);
            }
        }
    }

    static ModelConfig config(Path dir, String arch, String type, String extra) throws IOException {
        Files.writeString(dir.resolve("config.json"), """
                {"architectures": ["%s"], "model_type": "%s", "hidden_size": 896, "intermediate_size": 2048,
                 "num_hidden_layers": 3, "num_attention_heads": 14, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 4096,
                 "max_position_embeddings": 8192, "rope_theta": 1000000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                 "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16" %s}
                """.formatted(arch, type, extra));
        return ConfigParser.read(dir.resolve("config.json"));
    }

    static float[][] run(CudaForwardPass gpu, int[] tokens, int... windows) {
        BlockTable t = new BlockTable(dev.spindle.backend.TestSteps.pool(gpu));
        List<float[]> rows = new ArrayList<>();
        int at = 0;
        for (int w : windows) {
            rows.addAll(Arrays.asList(dev.spindle.backend.ForwardPass.run(gpu, Arrays.copyOfRange(tokens, at, at + w), t, true)));
            at += w;
        }
        t.release();
        return rows.toArray(float[][]::new);
    }

    static int[] ones(int n) {
        int[] w = new int[n];
        Arrays.fill(w, 1);
        return w;
    }

    void invariants(ModelConfig c, String label) {
        try (CudaForwardPass gpu = CudaForwardPass.open(c, null, OPTIONS, LoadListener.NONE)) {
            Random rnd = new Random(3);
            int n = 600; // three attention splits
            int[] tokens = rnd.ints(n, 0, c.vocabSize()).toArray();
            float[][] window = run(gpu, tokens, n);
            float[][] again = run(gpu, tokens, n);
            for (int r = 0; r < n; r++) {
                assertArrayEquals(window[r], again[r], label + ": two runs differ at row " + r);
            }
            float[][] steps = run(gpu, tokens, ones(n));
            for (int r = 0; r < n; r++) {
                assertArrayEquals(window[r], steps[r], label + ": decode step " + r + " differs from the prefill window");
            }
            float[][] uneven = run(gpu, tokens, 100, 1, 250, 249);
            for (int r = 0; r < n; r++) {
                assertArrayEquals(window[r], uneven[r], label + ": resumed windows differ at row " + r);
            }
            try (CudaForwardPass plain = CudaForwardPass.open(c, null, new CudaForwardPass.Options(16, 2048, 0.2, 4096, false), LoadListener.NONE)) {
                float[][] noGraph = run(plain, tokens, ones(n));
                for (int r = 0; r < n; r++) {
                    assertArrayEquals(window[r], noGraph[r], label + ": decode step " + r + " without CUDA graphs differs");
                }
            }
            System.out.printf("[cuda invariants] %s: %d rows: window = rows (graphs and launches) = resumed windows = second run, bit for bit%n", label, n);
            // batch invariance: the probe's decode steps alone, then among 6 and 63 other sequences
            for (int batch : new int[]{1, 7, 64}) {
                BlockTable probe = new BlockTable(dev.spindle.backend.TestSteps.pool(gpu));
                dev.spindle.backend.ForwardPass.run(gpu, Arrays.copyOf(tokens, 300), probe, false);
                List<BlockTable> others = new ArrayList<>();
                for (int i = 1; i < batch; i++) {
                    BlockTable o = new BlockTable(dev.spindle.backend.TestSteps.pool(gpu));
                    dev.spindle.backend.ForwardPass.run(gpu, rnd.ints(1 + rnd.nextInt(400), 0, c.vocabSize()).toArray(), o, false);
                    others.add(o);
                }
                for (int s = 300; s < 310; s++) {
                    List<Window> ws = new ArrayList<>();
                    ws.add(dev.spindle.backend.TestSteps.window(new int[]{tokens[s]}, probe, false, true));
                    for (BlockTable o : others) {
                        ws.add(dev.spindle.backend.TestSteps.window(new int[]{rnd.nextInt(c.vocabSize())}, o, false, true));
                    }
                    float[] got = dev.spindle.backend.TestSteps.forward(gpu, ws).getFirst()[0];
                    assertArrayEquals(window[s], got, label + ": in a batch of " + batch + ", step " + s + " differs");
                }
                probe.release();
                others.forEach(BlockTable::release);
            }
            System.out.printf("[cuda invariants] %s: decode in batches of 1, 7 and 64 equals the window, bit for bit%n", label);
        }
    }

    /**
     * Hidden-state taps (what a draft head reads): the residual stream after chosen layers equals the CPU reference's
     * within bf16 rounding, and a row's taps are the same bits in a window as in one-row steps.
     */
    @Test
    void tapsReadTheResidualStreamAfterTheChosenLayers() {
        try (Fixture f = new Fixture("llama-gqa"); CudaForwardPass gpu = open(f);
             dev.spindle.backend.cpu.CpuForwardPass cpu = f.cpu()) {
            int[] prompt = f.prompts.get(1);
            int last = f.model.config().executedLayers() - 1;
            int[] layers = {0, last / 2, last};
            float[][] windowTaps = dev.spindle.backend.TestSteps.taps(gpu, prompt, layers, false), rowTaps = dev.spindle.backend.TestSteps.taps(gpu, prompt, layers, true),
                    cpuTaps = dev.spindle.backend.TestSteps.taps(cpu, prompt, layers, false);
            double worst = 0, scale = 0;
            for (int r = 0; r < prompt.length; r++) {
                assertArrayEquals(windowTaps[r], rowTaps[r], "row " + r + ": window taps = one-row-step taps, bit for bit");
                for (int i = 0; i < cpuTaps[r].length; i++) {
                    worst = Math.max(worst, Math.abs(windowTaps[r][i] - cpuTaps[r][i]));
                    scale = Math.max(scale, Math.abs(cpuTaps[r][i]));
                }
            }
            System.out.printf("[cuda taps] %d rows x %d layers: window = rows bit for bit; max |cuda - cpu| %.4g of max |x| %.4g%n", prompt.length,
                    layers.length, worst, scale);
            assertTrue(worst <= 0.02 * scale, "CUDA taps far from the CPU's: " + worst + " of " + scale);
        }
    }

    @Test
    void invariantsOnTheLargeModelsHeadLayout(@TempDir Path dir) throws IOException {
        invariants(config(dir, "LlamaForCausalLM", "llama", ""), "llama 14/2 heads of 128");
    }

    @Test
    void invariantsOnALoopedModel(@TempDir Path dir) throws IOException {
        invariants(config(dir, "NanbeigeForCausalLM", "nanbeige", ", \"num_loops\": 2, \"skip_loop_final_norm\": false"), "looped 3 x 2");
    }
}

package dev.spindle.model.gguf;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.eval.Divergence;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelLoader;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * GGUF files quantized by llama.cpp's own llama-quantize (src/test/resources/fixtures/gguf/README.md): a random llama with
 * rows of 256 (the K-quants' super-blocks) in ggml's mixes, each file's types as llama.cpp chose them, served within a KL
 * bound of the bf16 file that tightens with the bits, every window row equal to the row decoded alone.
 */
class GgufKQuantTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/gguf");
    static final int[] PROMPT = new Random(9).ints(32, 3, 256).toArray();

    static float[][] logits(LoadedModel m) {
        try (CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            return TestSteps.windowLogits(cpu, PROMPT);
        }
    }

    @ParameterizedTest
    @CsvSource({"q8_0, 2e-5", "q6_k, 2e-4", "q5_k_m, 5e-4", "q4_k_m, 2e-3", "iq4_xs, 2e-3", "iq4_nl, 2e-3", "q3_k_m, 6e-3", "q2_k, 2.5e-2"})
    void llamaQuantizesFilesServeCloseToBf16(String rung, double bound) {
        try (LoadedModel bf16 = ModelLoader.load(DIR.resolve("llama-kquant-bf16.gguf"), LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(DIR.resolve("llama-kquant-" + rung + ".gguf"), LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            Set<String> types = new TreeSet<>();
            var l = q.weights().layers().getFirst();
            for (Matrix m : List.of(l.q(), l.k(), l.v(), l.o(), l.gate(), l.up(), l.down(), q.weights().lmHead())) {
                types.add(m instanceof GgmlMatrix g ? g.type().name() : m.format());
            }
            float[][] want = logits(bf16), got = logits(q);
            double kl = 0;
            for (int i = 0; i < got.length; i++) {
                kl += Divergence.kl(want[i], got[i]) / got.length;
            }
            System.out.printf("[gguf] llama-quantize %s (types %s): KL(bf16 || %s) %.3g%n", rung, types, rung, kl);
            assertTrue(kl > 0 && kl < bound, rung + ": KL " + kl + " against a bound of " + bound);
            try (CpuForwardPass cpu = new CpuForwardPass(q.config(), q.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                TestSteps.assertStepsEqualWindow(cpu, PROMPT, got, rung);
            }
        }
    }
}

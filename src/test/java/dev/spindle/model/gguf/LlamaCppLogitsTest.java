package dev.spindle.model.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.eval.Divergence;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Spindle against llama.cpp on the same GGUF files (issue 54): llama.cpp's own logits for every fixture
 * (fixtures/gguf/llama-cpp-logits, scripts/make_llama_cpp_logits.py: its CPU build at the fixtures' commit, teacher-forced
 * over 48 seeded ids) against Spindle's CPU backend over the same ids. The two engines differ where llama.cpp's CPU dot
 * products round the activations (to bf16 for bf16 weights, to 8-bit blocks, Q8_0 or Q8_K, for quantized ones) where
 * Spindle keeps them bf16: the KL between them is that rounding's, far below the quantization's own cost (measured: 7.5e-5
 * for llama-gqa in bf16, 1.6e-4 at Q8_0 and Q4_0; 1e-6 to 4e-6 for the K-quant fixture in every type), and where their greedy
 * choices differ, llama.cpp's own logits put the two within a near tie.
 */
class LlamaCppLogitsTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/gguf");

    @Test
    void spindlesLogitsAreLlamaCppsOnEveryFixture() throws IOException {
        JsonNode index = new ObjectMapper().readTree(DIR.resolve("llama-cpp-logits/index.json").toFile());
        int compared = 0;
        for (Iterator<Map.Entry<String, JsonNode>> it = index.path("fixtures").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String name = e.getKey();
            int vocab = e.getValue().path("vocab").asInt();
            int[] ids = new int[e.getValue().path("ids").size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = e.getValue().path("ids").get(i).asInt();
            }
            ByteBuffer raw = ByteBuffer.wrap(Files.readAllBytes(DIR.resolve("llama-cpp-logits/" + name + ".f32"))).order(ByteOrder.LITTLE_ENDIAN);
            float[][] theirs = new float[ids.length][vocab];
            for (float[] row : theirs) {
                raw.asFloatBuffer().get(row);
                raw.position(raw.position() + 4 * vocab);
            }
            try (LoadedModel m = ModelLoader.load(DIR.resolve(name + ".gguf"), LoadFormat.SAFETENSORS, LoadListener.NONE);
                 CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                float[][] ours = TestSteps.windowLogits(cpu, ids);
                double kl = 0, worst = 0, widest = 0;
                int same = 0;
                for (int p = 0; p < ids.length; p++) {
                    double d = Divergence.kl(theirs[p], ours[p]);
                    kl += d;
                    worst = Math.max(worst, d);
                    int a = Divergence.argmax(theirs[p]), b = Divergence.argmax(ours[p]);
                    same += a == b ? 1 : 0;
                    // where the engines choose differently, how far apart llama.cpp puts the two choices (a near tie: a small gap)
                    widest = Math.max(widest, theirs[p][a] - theirs[p][b]);
                }
                kl /= ids.length;
                System.out.printf("[gguf] %s (%s): KL(llama.cpp || spindle) mean %.3g, max %.3g, top-1 agreement %d/%d (the widest"
                        + " disagreement %.4f logits apart in llama.cpp's)%n", name, m.weights().layers().getFirst().q().format(), kl, worst, same,
                        ids.length, widest);
                assertTrue(kl < 1e-3 && worst < 2e-3, name + ": KL(llama.cpp || spindle) mean " + kl + ", max " + worst);
                // the two engines' logits differ by ~0.02 rms on llama-gqa (KL 1.6e-4 ~ gap^2 / 2): a choice 0.1 apart is 5 of those
                assertTrue(widest < 0.1, name + ": the engines' greedy choices differ where llama.cpp's are " + widest + " logits apart (not a near tie)");
                compared++;
            }
        }
        assertTrue(compared >= 12, "fixtures compared: " + compared);
    }
}

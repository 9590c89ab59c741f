package dev.spindle.model.gguf;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.eval.Divergence;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoadException;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * GGUF files of the llama-gqa fixture written as llama.cpp's converter lays them out (scripts/make_gguf_fixtures.py, with
 * llama.cpp's gguf-py): the bf16 file serves the safetensors checkpoint's logits bit for bit (metadata, names, q/k row
 * order all read right); the Q8_0 and Q4_0 files stay close to it, in that order, with every row of a window equal to the
 * same row decoded alone.
 */
class GgufModelTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/gguf");
    static final Path SAFETENSORS = Path.of("src/test/resources/fixtures/llama-gqa");

    static float[][] logits(LoadedModel m, int[] prompt) {
        try (CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            return TestSteps.windowLogits(cpu, prompt);
        }
    }

    static final int[] PROMPT = new Random(5).ints(40, 3, 512).toArray();

    @Test
    void aBf16FileServesTheCheckpointsLogitsBitForBit() {
        try (LoadedModel st = ModelLoader.load(SAFETENSORS, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel gg = ModelLoader.load(DIR.resolve("llama-gqa-bf16.gguf"), LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            assertEquals(st.config(), gg.config(), "the llama.* metadata read as the config.json");
            float[][] want = logits(st, PROMPT), got = logits(gg, PROMPT);
            for (int i = 0; i < want.length; i++) {
                assertArrayEquals(want[i], got[i], "row " + i);
            }
        }
    }

    @Test
    void quantizedFilesStayCloseAndKeepTheInvariants() {
        double previous = 0;
        try (LoadedModel st = ModelLoader.load(SAFETENSORS, LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            float[][] bf16 = logits(st, PROMPT);
            for (String type : new String[]{"q8_0", "q4_0"}) {
                try (LoadedModel gg = ModelLoader.load(DIR.resolve("llama-gqa-" + type + ".gguf"), LoadFormat.SAFETENSORS, LoadListener.NONE)) {
                    assertTrue(gg.weights().layers().getFirst().q() instanceof GgmlMatrix g && g.type().name().equalsIgnoreCase(type),
                            gg.weights().layers().getFirst().q().format());
                    float[][] got = logits(gg, PROMPT);
                    double kl = 0;
                    for (int i = 0; i < got.length; i++) {
                        kl += Divergence.kl(bf16[i], got[i]) / got.length;
                    }
                    System.out.printf("[gguf] llama-gqa %s: KL(bf16 || %s) %.3g over %d positions%n", type, type, kl, got.length);
                    assertTrue(kl > 0 && kl < (type.equals("q8_0") ? 1e-3 : 5e-2), type + ": KL " + kl);
                    assertTrue(kl > previous, "Q4_0 further from bf16 than Q8_0");
                    previous = kl;
                    // each row of the window equals the same position decoded one token at a time
                    try (CpuForwardPass cpu = new CpuForwardPass(gg.config(), gg.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                        TestSteps.assertStepsEqualWindow(cpu, PROMPT, got, type);
                    }
                }
            }
        }
    }

    @Test
    void aGgufFileTakesNoDummyWeightsOrQuantizationAtLoad() {
        Path f = DIR.resolve("llama-gqa-q8_0.gguf");
        ModelLoadException dummy = assertThrows(ModelLoadException.class, () -> ModelLoader.load(f, LoadFormat.DUMMY, LoadListener.NONE));
        assertTrue(dummy.getMessage().contains("--load-format dummy"), dummy.getMessage());
        ModelLoadException q = assertThrows(ModelLoadException.class, () -> ModelLoader.load(f, LoadFormat.SAFETENSORS, LoadListener.NONE,
                dev.spindle.model.HostReads.AT_LOAD, Quantization.FP8_BLOCK));
        assertTrue(q.getMessage().contains("--quantization fp8-block"), q.getMessage());
    }

    /**
     * The bundled chat model as one GGUF file (bf16 weights in llama.cpp's layout, the vocabulary and chat template in the
     * metadata; GgufTestFiles): the release's config and logits bit for bit, and a rendered chat turn tokenizes to the Hugging
     * Face tokenizer's ids (the file's vocabulary has no space prefix: chat prompts begin with a special token).
     */
    @Test
    void theBundledModelAsOneFileServesWhatItsDirectoryServes() {
        Path dir = Path.of("models/spindle-chat-target");
        Path file = GgufTestFiles.bf16WithMetadata(dir, Path.of("src/test/resources/fixtures/gguf-vocab/spindle-chat-target-vocab-prefix-false.gguf"),
                Path.of("target/gguf/spindle-chat-target-bf16.gguf"));
        int[] prompt = new Random(12).ints(48, 3, 4000).toArray();
        try (LoadedModel st = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel gg = ModelLoader.load(file, LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            assertEquals(st.config(), gg.config());
            float[][] want = logits(st, prompt), got = logits(gg, prompt);
            for (int i = 0; i < want.length; i++) {
                assertArrayEquals(want[i], got[i], "row " + i);
            }
        }
        var messages = List.of(java.util.Map.of("role", "system", "content", "You are terse."), java.util.Map.of("role", "user", "content",
                "What's 12 + 30? Answer  with a number, café, 你好."));
        String fromDir = dev.spindle.wiring.ModelFiles.chatTemplate(dir).render(messages, List.of(), java.util.Map.of("add_generation_prompt", true));
        String fromFile = dev.spindle.wiring.ModelFiles.chatTemplate(file).render(messages, List.of(), java.util.Map.of("add_generation_prompt", true));
        assertEquals(fromDir, fromFile, "the file's chat template renders as the directory's");
        try (var hf = dev.spindle.wiring.ModelFiles.tokenizer(dir); var spm = dev.spindle.wiring.ModelFiles.tokenizer(file)) {
            assertArrayEquals(hf.encode(fromDir), spm.encode(fromFile), "a chat prompt's ids");
            assertEquals(hf.addedTokenId("<|im_end|>"), spm.addedTokenId("<|im_end|>"));
        }
    }
}

package dev.spindle.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Parity on a trained model: for held-out chats, Spindle's prompt ids (template +
 * tokenizer) equal HF's, and Spindle's CPU greedy reply equals HF transformers' (bf16,
 * eager) token for token up to HF's first top-2 margin under two bf16 ulps.
 */
public class ChatModelParityTest {
    static final Path MODEL = Path.of("models/spindle-chat-target");

    @Test
    void greedyRepliesMatchHf() throws IOException {
        JsonNode ref = new ObjectMapper().readTree(Path.of("src/test/resources/fixtures/chat-target/reference.json").toFile());
        try (LoadedModel m = ModelLoader.load(MODEL, LoadFormat.SAFETENSORS, LoadListener.NONE);
             Tokenizer tok = Tokenizer.load(MODEL);
             CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16)) {
            ChatTemplate template = ChatTemplate.fromModelDir(MODEL);
            int checked = 0, total = 0;
            for (JsonNode c : ref.get("cases")) {
                @SuppressWarnings("unchecked")
                Map<String, Object> kwargs = new java.util.LinkedHashMap<>((Map<String, Object>) JsonValues.toValue(c.get("kwargs")));
                kwargs.put("add_generation_prompt", true);
                String prompt = template.render((List<?>) JsonValues.toValue(c.get("messages")), (List<?>) JsonValues.toValue(c.get("tools")), kwargs);
                int[] ids = tok.encode(prompt);
                assertArrayEquals(ints(c.get("prompt_ids")), ids, c.get("kind") + ": prompt ids differ from HF's");
                int[] hf = ints(c.get("greedy"));
                int[] ours = new GreedyGenerator(cpu, 512).generate(ids, hf.length, Set.of(), t -> { }).tokens();
                int decisive = checkGreedy(c, ours, "chat parity");
                checked += decisive;
                total += hf.length;
            }
            assertTrue(checked >= total / 2, "too few decisive tokens: " + checked + " of " + total);
        }
    }

    /**
     * Our greedy tokens against a case's HF greedy: equal up to HF's first top-2 margin under two
     * bf16 ulps (asserted); prints the agreement; returns how many tokens were decisive.
     */
    public static int checkGreedy(JsonNode c, int[] ours, String label) {
        int[] hf = ints(c.get("greedy"));
        int decisive = 0;
        while (decisive < hf.length && c.get("margins").get(decisive).floatValue()
                >= 2 * Math.scalb(1.0f, Math.getExponent(c.get("tops").get(decisive).floatValue()) - 7)) {
            decisive++;
        }
        int agree = 0;
        while (agree < hf.length && hf[agree] == ours[agree]) {
            agree++;
        }
        System.out.printf("[%s] %s: %d of %d greedy tokens equal HF's (decisive for %d)%n", label, c.get("kind").asText(), agree, hf.length, decisive);
        assertTrue(agree >= decisive, c.get("kind") + ": diverged at " + agree + " before HF's first close call at " + decisive);
        return decisive;
    }

    public static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }
}

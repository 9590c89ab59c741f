package dev.spindle.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.HfParityTest;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.step.ForwardPass;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Parity on a trained model: for held-out chats, Spindle's prompt ids (template + tokenizer) equal
 * HF's; teacher-forced over a chat and its reply, Spindle's CPU logits pass the fidelity gate against
 * HF fp32 (no further from it than HF's bf16 eager and sdpa paths); and Spindle's CPU greedy reply
 * equals HF bf16 sdpa's token for token up to the first top-2 margin (either side's) under two bf16 ulps.
 */
public class ChatModelParityTest {
    static final Path MODEL = Path.of("models/spindle-chat-target");
    static final Path FIXTURE = Path.of("src/test/resources/fixtures/chat-target");

    @Test
    void greedyRepliesMatchHf() throws IOException {
        JsonNode ref = new ObjectMapper().readTree(FIXTURE.resolve("reference.json").toFile());
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
                int[] hf = ints(c.get("greedy_sdpa"));
                HfParityTest.Greedy ours = HfParityTest.Parity.greedy(cpu, ids, hf.length);
                checked += checkGreedy(c, ours, "chat parity");
                total += hf.length;
            }
            assertTrue(checked >= total / 2, "too few decisive tokens: " + checked + " of " + total);
        }
    }

    @Test
    void teacherForcedLogitsAreAsCloseToFp32AsHfsOwnBf16Paths() throws IOException {
        try (LoadedModel m = ModelLoader.load(MODEL, LoadFormat.SAFETENSORS, LoadListener.NONE);
             CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16)) {
            HfParityTest.Parity p = teacherForced(cpu);
            p.print("spindle-chat-target (cpu)");
            p.assertGate("spindle-chat-target");
        }
    }

    /** The gate's figures of {@code pass} (the chat target's weights) over the fixture's teacher-forced chats. */
    public static HfParityTest.Parity teacherForced(ForwardPass pass) throws IOException {
        JsonNode ref = new ObjectMapper().readTree(FIXTURE.resolve("reference.json").toFile());
        List<float[][]> ours = new java.util.ArrayList<>();
        for (JsonNode t : ref.get("teacher_forced")) {
            ours.add(HfParityTest.Parity.logits(pass, ints(t.get("ids")), false));
        }
        try (dev.spindle.Fixture.References refs = dev.spindle.Fixture.References.open(FIXTURE.resolve("reference.safetensors"))) {
            return HfParityTest.Parity.of(refs::matrix, ours);
        }
    }

    /**
     * Our greedy tokens against a case's HF bf16 sdpa greedy: equal up to the first step where HF's top-2
     * margin or ours ({@code ours.margins()}, null: HF's alone) is under two bf16 ulps (asserted); prints the
     * agreement; returns how many tokens were decisive.
     */
    public static int checkGreedy(JsonNode c, HfParityTest.Greedy ours, String label) {
        int[] hf = ints(c.get("greedy_sdpa"));
        float[] margins = floats(c.get("margins_sdpa")), tops = floats(c.get("tops_sdpa"));
        int decisive = ours.margins() == null
                ? HfParityTest.decisive(hf, margins, tops, new HfParityTest.Greedy(ours.tokens(), margins, tops))
                : HfParityTest.decisive(hf, margins, tops, ours);
        int agree = HfParityTest.agreement(hf, ours.tokens());
        System.out.printf("[%s] %s: %d of %d greedy tokens equal HF bf16 sdpa's (decisive for %d)%n", label, c.get("kind").asText(), agree, hf.length, decisive);
        assertTrue(agree >= decisive, c.get("kind") + ": diverged at " + agree + " before the first close call at " + decisive);
        return decisive;
    }

    static float[] floats(JsonNode a) {
        float[] out = new float[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).floatValue();
        }
        return out;
    }

    public static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }
}

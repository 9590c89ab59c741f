package dev.spindle.engine;

import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The bundled target, end to end through the engine core (template, tokenizer, CPU
 * backend, detokenizer, reply parser): it answers a held-out arithmetic question
 * correctly and calls the weather tool when asked about the weather.
 */
class ChatEndToEndTest {
    static final Path MODEL = Path.of("models/spindle-chat-target");
    static LoadedModel model;
    static Tokenizer tok;
    static CpuForwardPass cpu;
    static ChatRunner runner;

    @BeforeAll
    static void load() {
        model = ModelLoader.load(MODEL, LoadFormat.SAFETENSORS, LoadListener.NONE);
        tok = Tokenizer.load(MODEL);
        cpu = new CpuForwardPass(model.config(), model.weights(), 64, 16);
        runner = new ChatRunner(cpu, tok, ChatTemplate.fromModelDir(MODEL));
    }

    @AfterAll
    static void close() {
        cpu.close();
        tok.close();
        model.close();
    }

    @Test
    void answersArithmetic() {
        List<String> streamed = new ArrayList<>();
        ChatReply r = runner.complete(List.of(Map.of("role", "user", "content", "What is 58 + 27?")), null, Map.of(), 200,
                d -> streamed.add(d.content()));
        System.out.println("[e2e] reasoning: " + r.reasoning() + " | content: " + r.content());
        assertTrue(r.content().contains("85"), "expected 85 in: " + r.content());
        assertTrue(r.reasoning().contains("carry"), "the reply reasons first: " + r.reasoning());
        assertEquals("stop", r.finishReason());
        assertEquals(r.content(), String.join("", streamed), "streamed content equals the final content");
    }

    @Test
    void callsTheWeatherTool() {
        Object tools = JsonValues.toValue(ChatModelParityTestJson.WEATHER_TOOLS);
        ChatReply r = runner.complete(List.of(Map.of("role", "user", "content", "What's the weather in Madrid?")), (List<?>) tools,
                Map.of(), 200, d -> { });
        System.out.println("[e2e] tool calls: " + r.toolCalls());
        assertEquals("tool_calls", r.finishReason());
        assertEquals(1, r.toolCalls().size());
        assertEquals("get_weather", r.toolCalls().getFirst().name());
        assertTrue(r.toolCalls().getFirst().arguments().contains("\"city\":\"Madrid\""), r.toolCalls().getFirst().arguments());
    }
}

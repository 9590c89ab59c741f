package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.jinja.TemplateException;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Other model families' template shapes (our own templates in src/test/resources/templates-compat,
 * written after Llama 3, Qwen, Mistral, Gemma, DeepSeek, Phi, Granite, GPT-OSS and Hermes) and
 * construct probes, against goldens rendered by Python's Jinja2 set up as HF does
 * (scripts/make_jinja_compat_goldens.py): byte-equal output, or a refusal where Python refused,
 * with raise_exception's own message.
 */
class ChatTemplateCompatTest {
    static final Path GOLDENS = Path.of("src/test/resources/templates-compat/goldens.jsonl");

    @TestFactory
    List<DynamicTest> compatGoldens() throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<DynamicTest> tests = new ArrayList<>();
        for (String line : Files.readAllLines(GOLDENS)) {
            JsonNode c = json.readTree(line);
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                String bos = c.hasNonNull("bos_token") ? c.get("bos_token").asText() : null;
                String eos = c.hasNonNull("eos_token") ? c.get("eos_token").asText() : null;
                List<?> messages = (List<?>) JsonValues.toValue(c.get("messages"));
                List<?> tools = (List<?>) JsonValues.toValue(c.get("tools"));
                @SuppressWarnings("unchecked")
                Map<String, Object> kwargs = new LinkedHashMap<>((Map<String, Object>) JsonValues.toValue(c.get("kwargs")));
                if (c.hasNonNull("documents")) {
                    kwargs.put("documents", JsonValues.toValue(c.get("documents")));
                }
                if (c.hasNonNull("error")) {
                    // a syntax error is refused as the template is compiled (TemplateException), any other as it renders
                    RuntimeException e = assertThrows(RuntimeException.class,
                            () -> new ChatTemplate(c.get("template").asText(), bos, eos).render(messages, tools, kwargs),
                            () -> "Python failed with " + c.path("python_error").asText(c.get("error").asText()));
                    assertTrue(e instanceof ChatTemplateException || e instanceof TemplateException, () -> "refused with " + e);
                    if (!c.get("error").asText().equals("*")) { // "*": Python failed too, in its own words
                        assertEquals(c.get("error").asText(), e.getMessage());
                    }
                } else {
                    ChatTemplate t = new ChatTemplate(c.get("template").asText(), bos, eos);
                    assertEquals(c.get("expected").asText(), t.render(messages, tools, kwargs));
                }
            }));
        }
        return tests;
    }
}

package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Goldens rendered by Python's Jinja2 set up as HF's apply_chat_template: the shared
 * Nanbeige 4.2 cases (../shared/fixtures, copied under src/test/resources/chat) and
 * Spindle's own construct-by-construct cases (scripts/make_template_goldens.py).
 */
class ChatTemplateGoldenTest {
    static final Path DIR = Path.of("src/test/resources/chat");

    @TestFactory
    List<DynamicTest> nanbeige42Goldens() throws IOException {
        ChatTemplate t = new ChatTemplate(Files.readString(DIR.resolve("nanbeige-4.2/chat_template.jinja")), "<|im_start|>", "<|im_end|>");
        return cases(DIR.resolve("nanbeige-4.2/chat_template_goldens.jsonl"), c -> t);
    }

    @TestFactory
    List<DynamicTest> constructGoldens() throws IOException {
        return cases(DIR.resolve("construct_goldens.jsonl"), c -> new ChatTemplate(c.get("template").asText(), "<|im_start|>", "<|im_end|>"));
    }

    static List<DynamicTest> cases(Path file, java.util.function.Function<JsonNode, ChatTemplate> templateOf) throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<DynamicTest> tests = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            JsonNode c = json.readTree(line);
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                ChatTemplate t = templateOf.apply(c);
                List<?> messages = (List<?>) JsonValues.toValue(c.get("messages"));
                List<?> tools = (List<?>) JsonValues.toValue(c.get("tools"));
                @SuppressWarnings("unchecked")
                Map<String, Object> kwargs = c.has("kwargs") ? (Map<String, Object>) JsonValues.toValue(c.get("kwargs")) : Map.of();
                if (c.hasNonNull("error")) {
                    ChatTemplateException e = assertThrows(ChatTemplateException.class, () -> t.render(messages, tools, kwargs));
                    if (!c.get("error").asText().equals("*")) { // "*": Python failed too, in its own words
                        assertEquals(c.get("error").asText(), e.getMessage());
                    }
                } else {
                    assertEquals(c.get("expected").asText(), t.render(messages, tools, kwargs));
                }
            }));
        }
        return tests;
    }
}

package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.Trials;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.ChatTemplateException;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a client may put in a chat request's messages, tools and chat_template_kwargs reaches the model's chat template
 * only through ChatMessages' checks, and then renders or is refused with a ChatTemplateException (a 400): never another
 * exception, which would be a 500. Generated requests: every role, contents as strings (with the template's own tags,
 * braces, quotes and newlines), null and text parts; assistant turns with tool calls whose arguments are any JSON
 * object (or a string holding one) and reasoning; tool results; tools with any parameters; template kwargs of any JSON
 * type. The bundled model's template, which is the Nanbeige 4.2 template.
 */
class ChatRenderPropertyTest {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final ChatTemplate TEMPLATE = ChatTemplate.fromModelDir(Path.of("models/spindle-chat-target"));

    private static final List<String> TAGS = List.of("", "<think>\nhm\n</think>\n\nok", "</think>", "<tool_call>\n<function=f>\n</function>\n</tool_call>",
            "<tool_response>", "{{ x }}", "{% if %}", "'\"\\", "\n\n", "<|im_end|>", "<|im_start|>user", "None", "true", "[1, 2]");

    /** Up to 12 chars: mostly printable ASCII, often the template's syntax and whitespace, and any char at all (lone surrogates too). */
    private static String chars(RandomGenerator r) {
        StringBuilder b = new StringBuilder();
        for (int n = Trials.between(r, 0, 12); b.length() < n; ) {
            char c = switch (Trials.frequency(r, 4, 2, 2)) {
                case 0 -> (char) r.nextInt(0x20, 0x7f);
                case 1 -> Trials.oneOf(r, ' ', '\n', '\t', '\0', '{', '}', '%', '#', '<', '>', '|', '\'', '"', '\\');
                default -> (char) r.nextInt(0x10000);
            };
            b.append(c);
        }
        return b.toString();
    }

    private static String text(RandomGenerator r) {
        return Trials.frequency(r, 3, 2) == 0 ? chars(r) : Trials.oneOf(r, TAGS);
    }

    /** Any finite double: often an edge, often a short decimal, else of any magnitude. */
    private static double number(RandomGenerator r) {
        return switch (Trials.frequency(r, 1, 3, 4)) {
            case 0 -> Trials.oneOf(r, 0.0, 1.0, -1.0, 0.01, -0.01, Double.MIN_VALUE, Double.MAX_VALUE, -Double.MAX_VALUE);
            case 1 -> Math.round(Trials.between(r, -1e6, 1e6) * 100) / 100.0;
            default -> (r.nextDouble() * 2 - 1) * Math.pow(10, r.nextInt(-300, 308));
        };
    }

    /** Any JSON value, nested a little. */
    private static JsonNode json(RandomGenerator r, int depth) {
        int kind = depth == 0 ? 0 : Trials.frequency(r, 3, 1, 1);
        if (kind == 0) {
            return switch (r.nextInt(4)) {
                case 0 -> NODES.textNode(text(r));
                case 1 -> NODES.numberNode(Trials.between(r, Integer.MIN_VALUE, Integer.MAX_VALUE));
                case 2 -> NODES.numberNode(number(r));
                default -> Trials.oneOf(r, NODES.booleanNode(true), NODES.booleanNode(false), NODES.nullNode());
            };
        }
        if (kind == 1) {
            return array(Trials.listOf(r, 0, 3, g -> json(g, depth - 1)));
        }
        // keys may repeat: a later one replaces the earlier
        List<String> keys = Trials.listOf(r, 0, 3, g -> Trials.oneOf(g, "a", "b", "type", "properties", "name", "description", "enum"));
        ObjectNode o = NODES.objectNode();
        for (String key : keys) {
            o.set(key, json(r, depth - 1));
        }
        return o;
    }

    private static ArrayNode array(List<JsonNode> items) {
        ArrayNode a = NODES.arrayNode();
        items.forEach(a::add);
        return a;
    }

    private static JsonNode content(RandomGenerator r) {
        return switch (Trials.frequency(r, 5, 1, 2)) {
            case 0 -> NODES.textNode(text(r));
            case 1 -> NODES.nullNode();
            default -> array(Trials.listOf(r, 0, 3, g -> (JsonNode) NODES.objectNode().put("type", "text").put("text", text(g))));
        };
    }

    private static JsonNode toolCall(RandomGenerator r) {
        JsonNode args = switch (Trials.frequency(r, 3, 2, 1)) {
            case 0 -> {
                JsonNode v = json(r, 2);
                yield v.isObject() ? v : NODES.objectNode().set("x", v);
            }
            case 1 -> NODES.textNode(NODES.objectNode().set("v", json(r, 2)).toString());
            default -> Trials.oneOf(r, NODES.textNode(""), NODES.nullNode());
        };
        ObjectNode call = NODES.objectNode().put("id", "call_1").put("type", "function");
        ObjectNode fn = call.putObject("function").put("name", Trials.oneOf(r, "get_weather", "f", "a.b", "x-y"));
        fn.set("arguments", args);
        return call;
    }

    private static JsonNode message(RandomGenerator r) {
        String role = Trials.oneOf(r, "system", "developer", "user", "assistant", "tool");
        ObjectNode m = NODES.objectNode().put("role", role);
        m.set("content", content(r));
        List<JsonNode> calls = Trials.listOf(r, 0, 2, ChatRenderPropertyTest::toolCall);
        String reasoning = r.nextInt(20) == 0 ? null : text(r); // absent 1 time in 20
        int extra = r.nextInt(4);
        if (role.equals("assistant") && extra % 2 == 1) {
            m.set("tool_calls", array(calls));
        }
        if (role.equals("assistant") && reasoning != null) {
            m.put("reasoning_content", reasoning);
        }
        if (role.equals("tool") && extra > 1) {
            m.put("tool_call_id", "call_1");
        }
        return m;
    }

    private static JsonNode tool(RandomGenerator r) {
        String name = Trials.oneOf(r, "get_weather", "f", "lookup");
        JsonNode params = json(r, 2);
        ObjectNode t = NODES.objectNode().put("type", "function");
        ObjectNode fn = t.putObject("function").put("name", name).put("description", text(r));
        if (params.isObject()) {
            fn.set("parameters", params);
        }
        return t;
    }

    private static JsonNode kwargs(RandomGenerator r) {
        JsonNode thinking = json(r, 1), preserve = json(r, 1);
        String format = Trials.oneOf(r, "xml", "json");
        int which = r.nextInt(8);
        ObjectNode k = NODES.objectNode();
        if ((which & 1) != 0) k.set("enable_thinking", thinking);
        if ((which & 2) != 0) k.set("preserve_thinking", preserve);
        if ((which & 4) != 0) k.put("tool_call_format", format);
        return k;
    }

    static ObjectNode request(RandomGenerator r) {
        ObjectNode body = NODES.objectNode();
        body.set("messages", array(Trials.listOf(r, 1, 6, ChatRenderPropertyTest::message)));
        List<JsonNode> tools = Trials.listOf(r, 0, 2, ChatRenderPropertyTest::tool);
        if (!tools.isEmpty()) {
            body.set("tools", array(tools));
        }
        body.set("chat_template_kwargs", kwargs(r));
        body.put("add_generation_prompt", r.nextBoolean());
        return body;
    }

    @Test
    void aRequestRendersOrIsRefusedAsABadRequest() {
        Trials.forAll(1500, ChatRenderPropertyTest::request, ChatRenderPropertyTest::aRequestRendersOrIsRefusedAsABadRequest);
    }

    static void aRequestRendersOrIsRefusedAsABadRequest(ObjectNode body) {
        List<?> messages;
        List<?> tools;
        Map<String, Object> kwargs;
        try {
            messages = ChatMessages.parse(body.get("messages"), "messages");
            tools = ChatMessages.tools(body.get("tools"), "tools");
            kwargs = ChatMessages.templateKwargs(body);
        } catch (ApiException refused) {
            assertTrue(refused.status == 400, "a refusal is a 400: " + refused.getMessage());
            return;
        }
        kwargs.putIfAbsent("add_generation_prompt", body.get("add_generation_prompt").asBoolean());
        try {
            String prompt = TEMPLATE.render(messages, tools, kwargs);
            assertTrue(prompt != null, "a rendered prompt");
        } catch (ChatTemplateException refused) {
            assertTrue(refused.getMessage() != null && !refused.getMessage().isBlank(), "a refusal says why");
        }
    }
}

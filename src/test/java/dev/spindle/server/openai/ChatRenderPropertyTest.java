package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.ChatTemplateException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

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

    private static Arbitrary<String> text() {
        return Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(3, Arbitraries.strings().ofMaxLength(12)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of("", "<think>\nhm\n</think>\n\nok", "</think>", "<tool_call>\n<function=f>\n</function>\n</tool_call>",
                        "<tool_response>", "{{ x }}", "{% if %}", "'\"\\", "\n\n", "<|im_end|>", "<|im_start|>user", "None", "true", "[1, 2]")));
    }

    /** Any JSON value, nested a little. */
    private static Arbitrary<JsonNode> json(int depth) {
        Arbitrary<JsonNode> leaf = Arbitraries.oneOf(text().map(NODES::textNode), Arbitraries.integers().map(NODES::numberNode),
                Arbitraries.doubles().map(NODES::numberNode), Arbitraries.of(NODES.booleanNode(true), NODES.booleanNode(false), NODES.nullNode()));
        if (depth == 0) {
            return leaf;
        }
        Arbitrary<JsonNode> list = json(depth - 1).list().ofMaxSize(3).map(ChatRenderPropertyTest::array);
        Arbitrary<JsonNode> object = Combinators.combine(Arbitraries.of("a", "b", "type", "properties", "name", "description", "enum").list().ofMaxSize(3),
                json(depth - 1).list().ofSize(3)).as((keys, values) -> {
            ObjectNode o = NODES.objectNode();
            for (int i = 0; i < keys.size(); i++) {
                o.set(keys.get(i), values.get(i));
            }
            return o;
        });
        return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(3, leaf), net.jqwik.api.Tuple.of(1, list), net.jqwik.api.Tuple.of(1, object));
    }

    private static ArrayNode array(List<JsonNode> items) {
        ArrayNode a = NODES.arrayNode();
        items.forEach(a::add);
        return a;
    }

    private static Arbitrary<JsonNode> content() {
        return Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(5, text().map(NODES::textNode)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(NODES.nullNode())),
                net.jqwik.api.Tuple.of(2, text().list().ofMaxSize(3).map(ts -> array(ts.stream()
                        .map(t -> (JsonNode) NODES.objectNode().put("type", "text").put("text", t)).toList()))));
    }

    private static Arbitrary<JsonNode> toolCall() {
        Arbitrary<JsonNode> args = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(3, json(2).map(v -> v.isObject() ? v : (JsonNode) NODES.objectNode().set("x", v))),
                net.jqwik.api.Tuple.of(2, json(2).map(v -> (JsonNode) NODES.textNode(NODES.objectNode().set("v", v).toString()))),
                net.jqwik.api.Tuple.of(1, Arbitraries.of(NODES.textNode(""), NODES.nullNode())));
        return Combinators.combine(Arbitraries.of("get_weather", "f", "a.b", "x-y"), args).as((name, a) -> {
            ObjectNode call = NODES.objectNode().put("id", "call_1").put("type", "function");
            ObjectNode fn = call.putObject("function").put("name", name);
            fn.set("arguments", a);
            return call;
        });
    }

    @Provide
    Arbitrary<ObjectNode> requests() {
        Arbitrary<JsonNode> message = Combinators.combine(Arbitraries.of("system", "developer", "user", "assistant", "tool"), content(),
                toolCall().list().ofMaxSize(2), text().optional(), Arbitraries.integers().between(0, 3)).as((role, c, calls, reasoning, extra) -> {
            ObjectNode m = NODES.objectNode().put("role", role);
            m.set("content", c);
            if (role.equals("assistant") && extra % 2 == 1) {
                m.set("tool_calls", array(calls));
            }
            if (role.equals("assistant")) {
                reasoning.ifPresent(r -> m.put("reasoning_content", r));
            }
            if (role.equals("tool") && extra > 1) {
                m.put("tool_call_id", "call_1");
            }
            return m;
        });
        Arbitrary<JsonNode> tool = Combinators.combine(Arbitraries.of("get_weather", "f", "lookup"), json(2), text()).as((name, params, description) -> {
            ObjectNode t = NODES.objectNode().put("type", "function");
            ObjectNode fn = t.putObject("function").put("name", name).put("description", description);
            if (params.isObject()) {
                fn.set("parameters", params);
            }
            return t;
        });
        Arbitrary<JsonNode> kwargs = Combinators.combine(json(1), json(1), Arbitraries.of("xml", "json"), Arbitraries.integers().between(0, 7))
                .as((thinking, preserve, format, which) -> {
                    ObjectNode k = NODES.objectNode();
                    if ((which & 1) != 0) k.set("enable_thinking", thinking);
                    if ((which & 2) != 0) k.set("preserve_thinking", preserve);
                    if ((which & 4) != 0) k.put("tool_call_format", format);
                    return k;
                });
        return Combinators.combine(message.list().ofMinSize(1).ofMaxSize(6), tool.list().ofMaxSize(2), kwargs, Arbitraries.of(true, false))
                .as((messages, tools, kw, prompt) -> {
                    ObjectNode body = NODES.objectNode();
                    body.set("messages", array(messages));
                    if (!tools.isEmpty()) {
                        body.set("tools", array(tools));
                    }
                    body.set("chat_template_kwargs", kw);
                    body.put("add_generation_prompt", prompt);
                    return body;
                });
    }

    @Property(tries = 1500)
    void aRequestRendersOrIsRefusedAsABadRequest(@ForAll("requests") ObjectNode body) {
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

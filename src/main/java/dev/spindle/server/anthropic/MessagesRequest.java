package dev.spindle.server.anthropic;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.Fields;

import java.util.List;
import java.util.Set;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * An Anthropic Messages API request ({@code POST /v1/messages}) translated into the chat-completions
 * body the one pipeline reads, its fields checked under their own names: {@code system} becomes a
 * system message; content blocks become chat turns ({@code text} the text, {@code tool_use} an
 * assistant turn's {@code tool_calls}, each {@code tool_result} a tool message, {@code thinking} the
 * assistant turn's {@code reasoning_content}); {@code tools} with {@code input_schema} become function
 * tools; {@code tool_choice} auto/any/tool/none becomes auto/required/the named function/none;
 * {@code thinking} disabled turns the template's thinking off; {@code stop_sequences} become stop
 * strings. A {@code tool_result} marked {@code is_error} reaches the model as "Error: " and its text.
 * A {@code system}-role message inside {@code messages} (Claude Code sends its environment block so)
 * is a system message where it stands (the pipeline merges it to the front where the template needs).
 * {@code output_config.format} (and the older {@code output_format}) is structured output, enforced as
 * response_format json_schema. {@code context_management} is applied before this translation
 * ({@link ContextEdits}). Accepted without effect (they tune Anthropic's service, or a thinking budget
 * the template does not have): {@code output_config.effort}, {@code output_config.task_budget}, {@code thinking.budget_tokens},
 * {@code metadata}, {@code service_tier}, {@code cache_control} on any block, the {@code anthropic-beta}
 * and {@code anthropic-version} headers.
 */
final class MessagesRequest {
    /** Fields that need Anthropic's own servers (code execution containers, remote MCP servers). */
    private static final Set<String> REFUSED = Set.of("container", "mcp_servers");
    private static final Set<String> EFFORTS = Set.of("low", "medium", "high", "xhigh", "max");

    private MessagesRequest() {
    }

    /** @param counting for count_tokens: max_tokens is not required */
    static ObjectNode parse(JsonNode body, boolean counting) {
        for (String f : REFUSED) {
            if (body.hasNonNull(f)) {
                throw ApiException.badRequest(f + " is not supported by this server; leave it out", f);
            }
        }
        ObjectNode chat = JSON.createObjectNode();
        if (!counting) {
            JsonNode max = body.get("max_tokens");
            if (max == null || max.isNull()) {
                throw ApiException.badRequest("max_tokens: field required", "max_tokens");
            }
            chat.put("max_tokens", Fields.integer(body, "max_tokens", 0, 1, Integer.MAX_VALUE));
        }
        ArrayNode messages = chat.putArray("messages");
        String system = system(body.get("system"), "system");
        if (!system.isEmpty()) {
            messages.addObject().put("role", "system").put("content", system);
        }
        JsonNode given = body.get("messages");
        if (given == null || !given.isArray() || given.isEmpty()) {
            throw ApiException.badRequest("messages: field required, a non-empty list of messages", "messages");
        }
        for (int i = 0; i < given.size(); i++) {
            message(given.get(i), "messages." + i, messages);
        }
        ArrayNode tools = tools(body.get("tools"));
        if (!tools.isEmpty()) {
            chat.set("tools", tools);
        }
        toolChoice(body.get("tool_choice"), chat);
        JsonNode thinking = Fields.object(body, "thinking");
        if (thinking != null) {
            String type = Fields.string(thinking, "type", "");
            switch (type) {
                case "enabled", "adaptive" -> Fields.integer(thinking, "budget_tokens", 1024, 1, Integer.MAX_VALUE);
                case "disabled" -> chat.putObject("chat_template_kwargs").put("enable_thinking", false);
                default -> throw ApiException.badRequest("thinking.type must be 'enabled', 'adaptive' or 'disabled'; got '" + type + "'", "thinking.type");
            }
        }
        JsonNode stops = Fields.array(body, "stop_sequences");
        if (stops != null) {
            for (int i = 0; i < stops.size(); i++) {
                if (!stops.get(i).isTextual()) {
                    throw ApiException.badRequest("stop_sequences." + i + ": a string was expected, got " + stops.get(i), "stop_sequences." + i);
                }
            }
            chat.set("stop", stops);
        }
        for (String f : List.of("temperature", "top_p", "top_k")) {
            JsonNode v = Fields.get(body, f);
            if (v != null) {
                if (!v.isNumber()) {
                    throw ApiException.badRequest(f + ": a number was expected, got " + v, f);
                }
                chat.set(f, v);
            }
        }
        if (body.hasNonNull("temperature")) {
            Fields.number(body, "temperature", 1, 0, 1); // Anthropic's range
        }
        outputConfig(body, chat);
        Fields.object(body, "metadata");
        Fields.string(body, "service_tier", "auto");
        Fields.bool(body, "stream", false);
        return chat;
    }

    /** output_config: effort (accepted, see the class comment) and format (structured output); output_format, its beta name. */
    private static void outputConfig(JsonNode body, ObjectNode chat) {
        JsonNode oc = Fields.object(body, "output_config");
        JsonNode format = null;
        String formatField = null;
        if (oc != null) {
            JsonNode effort = oc.get("effort");
            if (effort != null && !effort.isNull() && !(effort.isTextual() && EFFORTS.contains(effort.asText()))) {
                throw ApiException.badRequest("output_config.effort must be low, medium, high, xhigh or max; got " + effort, "output_config.effort");
            }
            format = oc.get("format");
            if (format != null && format.isNull()) {
                format = null;
            }
            if (format != null && !format.isObject()) {
                throw ApiException.badRequest("output_config.format must be an object {\"type\": \"json_schema\", \"schema\": ...}, got " + format, "output_config.format");
            }
            formatField = "output_config.format";
        }
        JsonNode legacy = Fields.object(body, "output_format");
        if (legacy != null) {
            if (format != null) {
                throw ApiException.badRequest("give output_config.format or output_format, not both", "output_format");
            }
            format = legacy;
            formatField = "output_format";
        }
        if (format == null) {
            return;
        }
        String type = format.path("type").asText("");
        if (!type.equals("json_schema")) {
            throw ApiException.badRequest(formatField + ".type must be 'json_schema'; got '" + type + "'", formatField + ".type");
        }
        JsonNode schema = format.get("schema");
        if (schema == null || !schema.isObject()) {
            throw ApiException.badRequest(formatField + ".schema: field required (a JSON schema object)", formatField + ".schema");
        }
        ObjectNode rf = chat.putObject("response_format").put("type", "json_schema");
        rf.putObject("json_schema").put("name", "output").set("schema", schema);
    }

    /** A system prompt: a string or a list of text blocks (joined by a blank line). */
    private static String system(JsonNode s, String path) {
        if (s == null || s.isNull()) {
            return "";
        }
        if (s.isTextual()) {
            return s.asText();
        }
        if (!s.isArray()) {
            throw ApiException.badRequest(path + " must be a string or a list of text blocks", path);
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.size(); i++) {
            JsonNode block = s.get(i);
            if (!"text".equals(block.path("type").asText()) || !block.path("text").isTextual()) {
                throw ApiException.badRequest(path + "." + i + " must be a text block {\"type\": \"text\", \"text\": ...}", path + "." + i);
            }
            if (!b.isEmpty()) {
                b.append("\n\n");
            }
            b.append(block.get("text").asText());
        }
        return b.toString();
    }

    private static void message(JsonNode m, String path, ArrayNode out) {
        if (!m.isObject()) {
            throw ApiException.badRequest(path + ": a message object was expected, got " + m, path);
        }
        String role = m.path("role").asText("");
        if (role.equals("system")) {
            out.addObject().put("role", "system").put("content", system(m.get("content"), path + ".content"));
            return;
        }
        if (!role.equals("user") && !role.equals("assistant")) {
            throw ApiException.badRequest(path + ".role: 'user', 'assistant' or 'system' was expected, got " + m.get("role"), path + ".role");
        }
        JsonNode content = m.get("content");
        if (content == null || content.isNull()) {
            throw ApiException.badRequest(path + ".content: field required", path + ".content");
        }
        if (content.isTextual()) {
            out.addObject().put("role", role).put("content", content.asText());
            return;
        }
        if (!content.isArray()) {
            throw ApiException.badRequest(path + ".content: a string or a list of content blocks was expected", path + ".content");
        }
        StringBuilder text = new StringBuilder();
        StringBuilder thinking = new StringBuilder();
        ArrayNode calls = JSON.createArrayNode();
        for (int k = 0; k < content.size(); k++) {
            JsonNode block = content.get(k);
            String p = path + ".content." + k;
            String type = block.path("type").asText("");
            switch (type) {
                case "text" -> {
                    if (!block.path("text").isTextual()) {
                        throw ApiException.badRequest(p + ".text: a string was expected", p + ".text");
                    }
                    text.append(block.get("text").asText());
                }
                case "thinking" -> {
                    requireRole(role, "assistant", p, type);
                    thinking.append(block.path("thinking").asText(""));
                }
                case "redacted_thinking" -> requireRole(role, "assistant", p, type); // another model's encrypted thinking: nothing to render
                case "tool_use" -> {
                    requireRole(role, "assistant", p, type);
                    String id = textField(block, "id", p);
                    String name = textField(block, "name", p);
                    JsonNode input = block.get("input");
                    if (input != null && !input.isNull() && !input.isObject()) {
                        throw ApiException.badRequest(p + ".input: an object was expected, got " + input, p + ".input");
                    }
                    ObjectNode call = calls.addObject().put("id", id).put("type", "function");
                    call.putObject("function").put("name", name).set("arguments", input == null || input.isNull() ? JSON.createObjectNode() : input);
                }
                case "tool_result" -> {
                    requireRole(role, "user", p, type);
                    if (!text.isEmpty()) { // text before the result stays before it
                        out.addObject().put("role", "user").put("content", text.toString());
                        text.setLength(0);
                    }
                    String id = textField(block, "tool_use_id", p);
                    String result = resultText(block.get("content"), p + ".content");
                    if (block.path("is_error").asBoolean(false)) {
                        result = "Error: " + result;
                    }
                    out.addObject().put("role", "tool").put("tool_call_id", id).put("content", result);
                }
                case "image", "document", "search_result", "audio" ->
                        throw ApiException.badRequest(p + " is a '" + type + "' block; this model is text-only, so only text blocks are accepted", p + ".type");
                default -> throw ApiException.badRequest(p + ".type: '" + type + "' is not a content block this server reads "
                        + "(text, thinking, tool_use, tool_result)", p + ".type");
            }
        }
        if (role.equals("assistant")) {
            ObjectNode turn = out.addObject().put("role", "assistant").put("content", text.toString());
            if (!thinking.isEmpty()) {
                turn.put("reasoning_content", thinking.toString());
            }
            if (!calls.isEmpty()) {
                turn.set("tool_calls", calls);
            }
        } else if (!text.isEmpty() || content.isEmpty()) {
            out.addObject().put("role", "user").put("content", text.toString());
        }
    }

    private static void requireRole(String role, String needed, String path, String type) {
        if (!role.equals(needed)) {
            throw ApiException.badRequest(path + ": a '" + type + "' block belongs in a message of role '" + needed + "'", path + ".type");
        }
    }

    private static String textField(JsonNode block, String field, String path) {
        JsonNode v = block.get(field);
        if (v == null || !v.isTextual() || v.asText().isEmpty()) {
            throw ApiException.badRequest(path + "." + field + ": field required (a non-empty string)", path + "." + field);
        }
        return v.asText();
    }

    private static String resultText(JsonNode c, String path) {
        if (c == null || c.isNull()) {
            return "";
        }
        if (c.isTextual()) {
            return c.asText();
        }
        if (!c.isArray()) {
            throw ApiException.badRequest(path + ": a string or a list of text blocks was expected", path);
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < c.size(); i++) {
            JsonNode block = c.get(i);
            String type = block.path("type").asText("");
            if (type.equals("text")) {
                b.append(block.path("text").asText(""));
            } else if (type.equals("image") || type.equals("document")) {
                throw ApiException.badRequest(path + "." + i + " is a '" + type + "' block; this model is text-only", path + "." + i + ".type");
            } else {
                throw ApiException.badRequest(path + "." + i + ".type: 'text' was expected, got '" + type + "'", path + "." + i + ".type");
            }
        }
        return b.toString();
    }

    private static ArrayNode tools(JsonNode tools) {
        ArrayNode out = JSON.createArrayNode();
        if (tools == null || tools.isNull()) {
            return out;
        }
        if (!tools.isArray()) {
            throw ApiException.badRequest("tools: a list was expected", "tools");
        }
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = tools.get(i);
            String p = "tools." + i;
            String type = t.path("type").asText("custom");
            if (!type.equals("custom")) {
                throw ApiException.badRequest(p + ".type: '" + type + "' is one of Anthropic's server tools, which this server does not have; "
                        + "give client tools with name and input_schema", p + ".type");
            }
            String name = textField(t, "name", p);
            JsonNode schema = t.get("input_schema");
            if (schema == null || !schema.isObject()) {
                throw ApiException.badRequest(p + ".input_schema: field required (a JSON schema object)", p + ".input_schema");
            }
            ObjectNode fn = out.addObject().put("type", "function").putObject("function").put("name", name);
            if (t.path("description").isTextual()) {
                fn.put("description", t.get("description").asText());
            }
            fn.set("parameters", schema);
        }
        return out;
    }

    private static void toolChoice(JsonNode c, ObjectNode chat) {
        if (c == null || c.isNull()) {
            return;
        }
        if (!c.isObject()) {
            throw ApiException.badRequest("tool_choice: an object {\"type\": auto|any|tool|none} was expected", "tool_choice");
        }
        String type = c.path("type").asText("");
        switch (type) {
            case "auto" -> chat.put("tool_choice", "auto");
            case "any" -> chat.put("tool_choice", "required");
            case "none" -> chat.put("tool_choice", "none");
            case "tool" -> {
                String name = textField(c, "name", "tool_choice");
                ObjectNode o = chat.putObject("tool_choice").put("type", "function");
                o.putObject("function").put("name", name);
            }
            default -> throw ApiException.badRequest("tool_choice.type: auto, any, tool or none was expected, got '" + type + "'", "tool_choice.type");
        }
        if (c.path("disable_parallel_tool_use").asBoolean(false)) {
            chat.put("parallel_tool_calls", false);
        }
    }
}

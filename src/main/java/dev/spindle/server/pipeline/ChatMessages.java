package dev.spindle.server.pipeline;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.JsonValues;
import dev.spindle.chat.SystemMessages;

import java.util.List;
import java.util.Set;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * Chat messages and tools as OpenAI clients send them, checked field by field and turned
 * into what the chat template reads. An assistant message's {@code tool_calls[].function.arguments}
 * is a JSON string in OpenAI's API (and in Spindle's own replies) but a mapping to the template
 * (it iterates {@code arguments|items}), so strings are parsed into objects here, as vLLM does.
 * The {@code developer} role is the system role; a null or absent {@code content} (an assistant
 * turn of tool calls, as the OpenAI clients send it) is the empty string.
 */
public final class ChatMessages {
    private static final Set<String> ROLES = Set.of("system", "developer", "user", "assistant", "tool");

    private ChatMessages() {
    }

    /** @param field the request field holding the list (for error paths) */
    public static List<?> parse(JsonNode messages, String field) {
        if (messages == null || !messages.isArray() || messages.isEmpty()) {
            throw ApiException.badRequest(field + " must be a non-empty list of messages", field);
        }
        ArrayNode out = JSON.createArrayNode();
        for (int i = 0; i < messages.size(); i++) {
            out.add(message(messages.get(i), field + "[" + i + "]"));
        }
        return (List<?>) JsonValues.toValue(out);
    }

    private static ObjectNode message(JsonNode m, String path) {
        if (!m.isObject()) {
            throw ApiException.badRequest(path + " must be an object with a role, got " + m, path);
        }
        ObjectNode out = ((ObjectNode) m).deepCopy();
        JsonNode role = m.get("role");
        if (role == null || !role.isTextual() || !ROLES.contains(role.asText())) {
            throw ApiException.badRequest(path + ".role must be one of system, developer, user, assistant, tool; got " + role, path + ".role");
        }
        if (role.asText().equals("developer")) {
            out.put("role", "system");
        }
        content(m.get("content"), path + ".content");
        if (m.get("content") == null || m.get("content").isNull()) {
            out.put("content", ""); // as vLLM does: the template would print a null as "None"
        }
        for (String f : List.of("name", "tool_call_id", "reasoning_content")) {
            JsonNode v = m.get(f);
            if (v != null && !v.isNull() && !v.isTextual()) {
                throw ApiException.badRequest(path + "." + f + " must be a string, got " + v, path + "." + f);
            }
        }
        if (!m.hasNonNull("reasoning_content") && m.path("reasoning").isTextual()) {
            out.put("reasoning_content", m.get("reasoning").asText()); // the field name some clients use
        }
        JsonNode calls = m.get("tool_calls");
        if (calls != null && !calls.isNull()) {
            if (!role.asText().equals("assistant")) {
                throw ApiException.badRequest(path + ".tool_calls is only for assistant messages", path + ".tool_calls");
            }
            if (!calls.isArray()) {
                throw ApiException.badRequest(path + ".tool_calls must be a list, got " + calls, path + ".tool_calls");
            }
            ArrayNode fixed = out.putArray("tool_calls");
            for (int j = 0; j < calls.size(); j++) {
                fixed.add(toolCall(calls.get(j), path + ".tool_calls[" + j + "]"));
            }
            if (calls.isEmpty()) {
                out.remove("tool_calls");
            }
        }
        return out;
    }

    private static void content(JsonNode c, String path) {
        if (c == null || c.isNull() || c.isTextual()) {
            return;
        }
        if (!c.isArray()) {
            throw ApiException.badRequest(path + " must be a string or a list of content parts, got " + c, path);
        }
        for (int k = 0; k < c.size(); k++) {
            JsonNode part = c.get(k);
            String p = path + "[" + k + "]";
            if (part.isTextual()) {
                continue;
            }
            if (!part.isObject() || !part.path("type").isTextual()) {
                throw ApiException.badRequest(p + " must be a content part with a type, got " + part, p);
            }
            String type = part.get("type").asText();
            if (!type.equals("text")) {
                throw ApiException.badRequest(p + " is a '" + type + "' part; this model is text-only, so only text parts are accepted", p + ".type");
            }
            if (!part.path("text").isTextual()) {
                throw ApiException.badRequest(p + ".text must be a string", p + ".text");
            }
        }
    }

    /** The text of a message's content as the template sees it: a string, or its text parts joined. */
    static String textOf(Object content) {
        return SystemMessages.textOf(content);
    }

    private static ObjectNode toolCall(JsonNode call, String path) {
        if (!call.isObject()) {
            throw ApiException.badRequest(path + " must be an object, got " + call, path);
        }
        ObjectNode out = ((ObjectNode) call).deepCopy();
        JsonNode fn = call.get("function");
        if (fn == null || !fn.isObject()) {
            throw ApiException.badRequest(path + ".function must be an object with name and arguments", path + ".function");
        }
        if (!fn.path("name").isTextual() || fn.get("name").asText().isEmpty()) {
            throw ApiException.badRequest(path + ".function.name must be a non-empty string", path + ".function.name");
        }
        ObjectNode f = out.putObject("function");
        f.put("name", fn.get("name").asText());
        f.set("arguments", arguments(fn.get("arguments"), path + ".function.arguments"));
        return out;
    }

    /** Arguments as an object: a JSON string (OpenAI's form) is parsed; "" and null are no arguments. */
    static ObjectNode arguments(JsonNode a, String path) {
        if (a == null || a.isNull()) {
            return JSON.createObjectNode();
        }
        if (a.isObject()) {
            return (ObjectNode) a;
        }
        if (!a.isTextual()) {
            throw ApiException.badRequest(path + " must be a JSON object or a string holding one, got " + a, path);
        }
        if (a.asText().isBlank()) {
            return JSON.createObjectNode();
        }
        JsonNode parsed;
        try {
            parsed = JSON.readTree(a.asText());
        } catch (JsonProcessingException e) {
            throw ApiException.badRequest(path + " is not valid JSON: " + e.getOriginalMessage(), path);
        }
        if (parsed == null || !parsed.isObject()) {
            throw ApiException.badRequest(path + " must hold a JSON object, got " + a.asText(), path);
        }
        return (ObjectNode) parsed;
    }

    /** {@code chat_template_kwargs} as the template's variables (an object, or absent). */
    public static java.util.Map<String, Object> templateKwargs(JsonNode body) {
        java.util.Map<String, Object> kwargs = new java.util.LinkedHashMap<>();
        JsonNode kw = Fields.object(body, "chat_template_kwargs");
        if (kw != null) {
            @SuppressWarnings("unchecked")
            java.util.Map<String, Object> kv = (java.util.Map<String, Object>) JsonValues.toValue(kw);
            kwargs.putAll(kv);
        }
        return kwargs;
    }

    /**
     * Tools as offered: a list of {@code {type: "function", function: {name, description?, parameters?}}}
     * (a bare function object is accepted too); null when there are none.
     */
    public static List<?> tools(JsonNode tools, String field) {
        if (tools == null || tools.isNull()) {
            return null;
        }
        if (!tools.isArray()) {
            throw ApiException.badRequest(field + " must be a list of tools, got " + tools, field);
        }
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = tools.get(i);
            String p = field + "[" + i + "]";
            if (!t.isObject()) {
                throw ApiException.badRequest(p + " must be an object, got " + t, p);
            }
            if (t.has("type") && !"function".equals(t.path("type").asText(null))) {
                throw ApiException.badRequest(p + ".type must be 'function', got " + t.get("type"), p + ".type");
            }
            JsonNode fn = t.has("function") ? t.get("function") : t;
            String fp = t.has("function") ? p + ".function" : p;
            if (!fn.isObject() || !fn.path("name").isTextual() || fn.get("name").asText().isEmpty()) {
                throw ApiException.badRequest(fp + ".name must be a non-empty string", fp + ".name");
            }
            JsonNode params = fn.get("parameters");
            if (params != null && !params.isNull() && !params.isObject()) {
                throw ApiException.badRequest(fp + ".parameters must be a JSON schema object, got " + params, fp + ".parameters");
            }
        }
        return tools.isEmpty() ? null : (List<?>) JsonValues.toValue(tools);
    }
}

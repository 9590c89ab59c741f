package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.grammar.Schema;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tools a request offers: each function's name and its parameters as a {@link Schema}
 * (compiled leniently: what constrained decoding cannot enforce is left unchecked). The
 * tool-call parser and the tool-call grammar read parameter types from here, so a value the
 * grammar lets through as raw text is the value the parser keeps as a string.
 */
public final class ToolSchemas {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Map<String, Schema> parameters = new LinkedHashMap<>();

    /** @param tools OpenAI tool definitions as JSON-like values ({@code [{type: function, function: {name, parameters}}]}) */
    public static ToolSchemas of(List<?> tools) {
        ToolSchemas s = new ToolSchemas();
        if (tools == null) {
            return s;
        }
        for (Object t : tools) {
            if (!(t instanceof Map<?, ?> tool)) {
                continue;
            }
            Object f = tool.containsKey("function") ? tool.get("function") : tool;
            if (f instanceof Map<?, ?> fn && fn.get("name") instanceof String name) {
                JsonNode params = fn.get("parameters") instanceof Map<?, ?> p ? JSON.valueToTree(p) : null;
                Schema schema;
                try {
                    schema = params == null ? Schema.anyObject() : Schema.compileLenient(params);
                } catch (IllegalArgumentException e) {
                    schema = Schema.anyObject(); // unreadable: parsed as free JSON, not constrained
                }
                s.parameters.put(name, schema);
            }
        }
        return s;
    }

    public boolean isEmpty() {
        return parameters.isEmpty();
    }

    public boolean has(String function) {
        return parameters.containsKey(function);
    }

    /** Each function's parameters object schema, in the order offered. */
    public Map<String, Schema> functions() {
        return java.util.Collections.unmodifiableMap(parameters);
    }

    /** True when the schema says the parameter is a string and nothing else (its text is then kept verbatim). */
    boolean isString(String function, String parameter) {
        Schema p = parameters.get(function);
        if (p == null) {
            return false;
        }
        Schema s = p.properties().get(parameter);
        if (s == null) {
            s = p.additional();
        }
        return s != null && s.stringOnly();
    }
}

package dev.spindle.chat;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The tools a request offers: each function's name and the JSON-schema type of each parameter. */
public final class ToolSchemas {
    private final Map<String, Map<String, Object>> parameters = new LinkedHashMap<>();

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
                Map<String, Object> props = new LinkedHashMap<>();
                if (fn.get("parameters") instanceof Map<?, ?> params && params.get("properties") instanceof Map<?, ?> p) {
                    p.forEach((k, v) -> props.put(String.valueOf(k), v));
                }
                s.parameters.put(name, props);
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

    /** True when the schema says the parameter is a string (its text is then kept verbatim). */
    boolean isString(String function, String parameter) {
        Object schema = parameters.getOrDefault(function, Map.of()).get(parameter);
        if (schema instanceof Map<?, ?> m) {
            Object type = m.get("type");
            if ("string".equals(type)) {
                return true;
            }
            if (type == null && m.get("enum") instanceof List<?> values && !values.isEmpty()
                    && values.stream().allMatch(v -> v instanceof String)) {
                return true;
            }
        }
        return false;
    }
}

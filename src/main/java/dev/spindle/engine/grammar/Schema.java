package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A JSON schema reduced to what constrained decoding enforces. Supported keywords: type
 * (one or a list), properties, required, additionalProperties (boolean or schema), items,
 * enum, const, anyOf / oneOf, minItems, maxItems, and the annotations title,
 * description, default, examples, $schema, format (not enforced). Anything else is refused
 * by name, so a client never gets output that silently ignores its schema.
 */
public record Schema(Set<Type> types, Map<String, Schema> properties, List<String> required, Schema additional,
                     boolean additionalAllowed, Schema items, List<JsonNode> enumValues, List<Schema> anyOf, int minItems, int maxItems) {
    public enum Type { OBJECT, ARRAY, STRING, INTEGER, NUMBER, BOOLEAN, NULL }

    private static final Set<String> KNOWN = Set.of("type", "properties", "required", "additionalProperties", "items", "enum", "const",
            "anyOf", "oneOf", "minItems", "maxItems", "title", "description", "default", "examples", "$schema", "format", "strict");

    /** Any JSON value (json_object mode uses {@code anyObject()}). */
    public static Schema any() {
        return new Schema(EnumSet.allOf(Type.class), Map.of(), List.of(), null, true, null, null, List.of(), 0, Integer.MAX_VALUE);
    }

    public static Schema anyObject() {
        return new Schema(EnumSet.of(Type.OBJECT), Map.of(), List.of(), null, true, null, null, List.of(), 0, Integer.MAX_VALUE);
    }

    /** @throws IllegalArgumentException naming an unsupported keyword (path included) */
    public static Schema compile(JsonNode s) {
        return compile(s, "$");
    }

    private static Schema compile(JsonNode s, String path) {
        if (s == null || s.isBoolean() && s.asBoolean()) {
            return any();
        }
        if (!s.isObject()) {
            throw new IllegalArgumentException("schema at " + path + " must be an object");
        }
        s.fieldNames().forEachRemaining(k -> {
            if (!KNOWN.contains(k)) {
                throw new IllegalArgumentException("JSON schema keyword '" + k + "' at " + path + " is not supported by constrained decoding");
            }
        });
        List<Schema> alternatives = new ArrayList<>();
        for (String key : List.of("anyOf", "oneOf")) {
            if (s.has(key)) {
                int i = 0;
                for (JsonNode alt : s.get(key)) {
                    alternatives.add(compile(alt, path + "." + key + "[" + i++ + "]"));
                }
            }
        }
        Set<Type> types = EnumSet.noneOf(Type.class);
        JsonNode t = s.get("type");
        if (t == null) {
            types = EnumSet.allOf(Type.class);
        } else {
            for (JsonNode one : t.isArray() ? t : List.of(t)) {
                try {
                    types.add(Type.valueOf(one.asText().toUpperCase()));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("unknown JSON schema type '" + one.asText() + "' at " + path);
                }
            }
        }
        if (types.contains(Type.NUMBER)) {
            types.add(Type.INTEGER);
        }
        Map<String, Schema> props = new LinkedHashMap<>();
        if (s.has("properties")) {
            s.get("properties").fields().forEachRemaining(e -> props.put(e.getKey(), compile(e.getValue(), path + ".properties." + e.getKey())));
        }
        List<String> required = new ArrayList<>();
        s.path("required").forEach(r -> required.add(r.asText()));
        JsonNode ap = s.get("additionalProperties");
        boolean allowed = ap == null || !ap.isBoolean() || ap.asBoolean();
        Schema additional = ap != null && ap.isObject() ? compile(ap, path + ".additionalProperties") : null;
        List<JsonNode> enums = null;
        if (s.has("enum")) {
            enums = new ArrayList<>();
            s.get("enum").forEach(enums::add);
        }
        if (s.has("const")) {
            enums = List.of(s.get("const"));
        }
        Schema items = s.has("items") ? compile(s.get("items"), path + ".items") : null;
        return new Schema(types, props, required, additional, allowed, items, enums, alternatives,
                s.path("minItems").asInt(0), s.has("maxItems") ? s.get("maxItems").asInt() : Integer.MAX_VALUE);
    }
}

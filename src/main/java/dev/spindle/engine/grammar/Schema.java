package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A JSON schema reduced to what constrained decoding enforces. Enforced keywords: type
 * (one or a list), properties, required, additionalProperties (boolean or schema), items,
 * enum, const, anyOf / oneOf, minItems, maxItems, nullable. Annotations (title,
 * description, default, examples, $schema, $id, $comment, format, strict, deprecated,
 * readOnly, writeOnly) are read and not enforced.
 *
 * <p>As OpenAI's strict structured outputs and xgrammar's strict mode do, an object that
 * lists {@code properties} and says nothing of {@code additionalProperties} takes no other
 * keys: the model writes the schema's properties, not ones it invents.
 *
 * <p>{@link #compile} (response_format, forced tool calls) refuses any other keyword by name,
 * so a client never gets output that silently ignores its schema. {@link #compileLenient}
 * (tools the model may call of its own accord) leaves unenforced validation keywords
 * (minimum, pattern, ...) unchecked and makes a subschema it cannot read ($ref, allOf, ...) any value.
 */
public record Schema(Set<Type> types, Map<String, Schema> properties, List<String> required, Schema additional,
                     boolean additionalAllowed, Schema items, List<JsonNode> enumValues, List<Schema> anyOf, int minItems, int maxItems) {
    public enum Type { OBJECT, ARRAY, STRING, INTEGER, NUMBER, BOOLEAN, NULL }

    private static final Set<String> ENFORCED = Set.of("type", "properties", "required", "additionalProperties", "items", "enum", "const",
            "anyOf", "oneOf", "minItems", "maxItems", "nullable");
    private static final Set<String> ANNOTATIONS = Set.of("title", "description", "default", "examples", "$schema", "$id", "$comment", "format",
            "strict", "deprecated", "readOnly", "writeOnly");
    /** Keywords that only narrow values: lenient compilation leaves them unchecked. */
    private static final Set<String> NARROWING = Set.of("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
            "minLength", "maxLength", "pattern", "minProperties", "maxProperties", "uniqueItems", "contentEncoding", "contentMediaType");

    public Schema {
        types = Set.copyOf(types.isEmpty() ? EnumSet.allOf(Type.class) : types);
        properties = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(properties));
        required = List.copyOf(required);
        anyOf = List.copyOf(anyOf);
        enumValues = enumValues == null ? null : List.copyOf(enumValues);
    }

    /** Identity: a compiled schema is one node of one grammar, and states compare schemas often. */
    @Override
    public boolean equals(Object o) {
        return this == o;
    }

    @Override
    public int hashCode() {
        return System.identityHashCode(this);
    }

    private static final java.util.function.Function<String, String> JSON_TEXT = t -> new com.fasterxml.jackson.databind.node.TextNode(t).toString();
    private static final Schema ANY = new Schema(EnumSet.allOf(Type.class), Map.of(), List.of(), null, true, null, null, List.of(), 0, Integer.MAX_VALUE);
    private static final Schema ANY_OBJECT = new Schema(EnumSet.of(Type.OBJECT), Map.of(), List.of(), null, true, null, null, List.of(), 0, Integer.MAX_VALUE);

    /** Any JSON value. */
    public static Schema any() {
        return ANY;
    }

    /** Any object (json_object mode). */
    public static Schema anyObject() {
        return ANY_OBJECT;
    }

    /** Whether every value of this schema is a string and nothing else (a raw-text tool parameter). */
    public boolean stringOnly() {
        if (!anyOf.isEmpty()) {
            return false;
        }
        if (enumValues != null) {
            return !enumValues.isEmpty() && enumValues.stream().allMatch(JsonNode::isTextual);
        }
        return types.equals(Set.of(Type.STRING));
    }

    /** @throws IllegalArgumentException naming an unsupported keyword or an unsatisfiable schema (path included) */
    public static Schema compile(JsonNode s) {
        return compile(s, "$", true);
    }

    /** As {@link #compile}, but what cannot be enforced is left unchecked instead of refused. */
    public static Schema compileLenient(JsonNode s) {
        return compile(s, "$", false);
    }

    private static Schema compile(JsonNode s, String path, boolean strict) {
        if (s == null || s.isBoolean() && s.asBoolean()) {
            return any();
        }
        if (!s.isObject()) {
            if (!strict) {
                return any();
            }
            throw new IllegalArgumentException("schema at " + path + " must be an object");
        }
        var names = s.fieldNames();
        while (names.hasNext()) {
            String k = names.next();
            if (ENFORCED.contains(k) || ANNOTATIONS.contains(k)) {
                continue;
            }
            if (strict) {
                throw new IllegalArgumentException("JSON schema keyword '" + k + "' at " + path + " is not supported by constrained decoding");
            }
            if (!NARROWING.contains(k) && !k.equals("$defs") && !k.equals("definitions")) {
                return any(); // $ref, allOf, not, if/then/else, prefixItems, ...: not read, so not constrained
            }
        }
        List<Schema> alternatives = new ArrayList<>();
        for (String key : List.of("anyOf", "oneOf")) {
            if (s.has(key)) {
                if (!s.get(key).isArray() || s.get(key).isEmpty()) {
                    throw new IllegalArgumentException(path + "." + key + " must be a non-empty list of schemas");
                }
                int i = 0;
                for (JsonNode alt : s.get(key)) {
                    alternatives.add(compile(alt, path + "." + key + "[" + i++ + "]", strict));
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
                    types.add(Type.valueOf(one.asText().toUpperCase(java.util.Locale.ROOT)));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("unknown JSON schema type '" + one.asText() + "' at " + path);
                }
            }
            if (types.isEmpty()) {
                throw new IllegalArgumentException("schema at " + path + " allows no type");
            }
        }
        if (s.path("nullable").asBoolean(false)) {
            types.add(Type.NULL);
        }
        if (types.contains(Type.NUMBER)) {
            types.add(Type.INTEGER);
        }
        Map<String, Schema> props = new LinkedHashMap<>();
        JsonNode properties = s.get("properties");
        if (properties != null) {
            if (!properties.isObject()) {
                throw new IllegalArgumentException(path + ".properties must be an object");
            }
            for (var it = properties.fields(); it.hasNext(); ) {
                var e = it.next();
                if (e.getKey().chars().anyMatch(ch -> ch < 0x20)) {
                    // such a name could only be written as an escape, which the recognizer does not resolve in keys
                    if (strict) {
                        throw new IllegalArgumentException("property name " + JSON_TEXT.apply(e.getKey()) + " at " + path + " contains a control character");
                    }
                    return any();
                }
                props.put(e.getKey(), compile(e.getValue(), path + ".properties." + e.getKey(), strict));
            }
        }
        List<String> required = new ArrayList<>();
        JsonNode req = s.get("required");
        if (req != null) {
            if (!req.isArray()) {
                throw new IllegalArgumentException(path + ".required must be a list of property names");
            }
            for (JsonNode r : req) {
                if (!r.isTextual()) {
                    throw new IllegalArgumentException(path + ".required must be a list of property names, got " + r);
                }
                if (!required.contains(r.asText())) {
                    required.add(r.asText());
                }
            }
        }
        JsonNode ap = s.get("additionalProperties");
        boolean allowed = ap == null ? props.isEmpty() : !ap.isBoolean() || ap.asBoolean();
        Schema additional = ap != null && ap.isObject() ? compile(ap, path + ".additionalProperties", strict) : null;
        if (!allowed) {
            for (String r : required) {
                if (!props.containsKey(r)) {
                    throw new IllegalArgumentException(path + ".required names '" + r + "', which is not among its properties (and no other property is allowed)");
                }
            }
        }
        List<JsonNode> enums = null;
        if (s.has("enum")) {
            if (!s.get("enum").isArray() || s.get("enum").isEmpty()) {
                throw new IllegalArgumentException(path + ".enum must be a non-empty list");
            }
            enums = new ArrayList<>();
            s.get("enum").forEach(enums::add);
        }
        if (s.has("const")) {
            enums = List.of(s.get("const"));
        }
        Schema items = s.has("items") ? compile(s.get("items"), path + ".items", strict) : null;
        int minItems = s.path("minItems").asInt(0);
        int maxItems = s.has("maxItems") ? s.get("maxItems").asInt() : Integer.MAX_VALUE;
        if (minItems < 0 || maxItems < minItems) {
            throw new IllegalArgumentException(path + ": minItems " + minItems + " and maxItems " + maxItems + " admit no array");
        }
        return new Schema(types, props, required, additional, allowed, items, enums, alternatives, minItems, maxItems);
    }
}

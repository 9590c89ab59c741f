package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Schemas of known values ({@code enum}, {@code const}) and the check of a value against a
 * node. A value's node admits its every spelling: a number by its value (1, 1.0 and 1.00 are
 * one value), an object by its keys in any order, a string by its decoded text (escapes too).
 */
final class SchemaValues {
    private SchemaValues() {
    }

    /** The union of these values' nodes; the strings share one node (one automaton of all of them). */
    static Schema ofValues(List<JsonNode> values) {
        List<Schema> alts = new ArrayList<>();
        List<String> strings = new ArrayList<>();
        List<JsonNode> stringValues = new ArrayList<>();
        for (JsonNode v : values) {
            if (v.isTextual()) {
                if (!strings.contains(v.asText())) {
                    strings.add(v.asText());
                    stringValues.add(v);
                }
            } else {
                alts.add(of(v));
            }
        }
        if (!strings.isEmpty()) {
            Schema s = Schema.typed(EnumSet.of(Schema.Type.STRING));
            s.string = new StringRule(Dfa.literals(strings), 0, Integer.MAX_VALUE);
            s.enumValues = List.copyOf(stringValues);
            alts.add(s);
        }
        return SchemaCompiler.union(alts);
    }

    /** The node admitting exactly {@code v}. */
    static Schema of(JsonNode v) {
        Schema s;
        if (v.isNull()) {
            s = Schema.typed(EnumSet.of(Schema.Type.NULL));
        } else if (v.isBoolean()) {
            s = Schema.typed(EnumSet.of(Schema.Type.BOOLEAN));
            s.bool = v.asBoolean();
        } else if (v.isNumber()) {
            s = Schema.typed(EnumSet.of(Schema.Type.NUMBER, Schema.Type.INTEGER));
            BigDecimal d = v.decimalValue();
            s.number = new NumberRule(d, false, d, false, null);
        } else if (v.isTextual()) {
            s = Schema.typed(EnumSet.of(Schema.Type.STRING));
            s.string = new StringRule(Dfa.literals(List.of(v.asText())), 0, Integer.MAX_VALUE);
        } else if (v.isArray()) {
            s = Schema.typed(EnumSet.of(Schema.Type.ARRAY));
            List<Schema> items = new ArrayList<>();
            v.forEach(e -> items.add(of(e)));
            s.prefixItems = List.copyOf(items);
            s.minItems = items.size();
            s.maxItems = items.size();
        } else {
            s = Schema.typed(EnumSet.of(Schema.Type.OBJECT));
            Map<String, Schema> props = new LinkedHashMap<>();
            for (var it = v.fields(); it.hasNext(); ) {
                var e = it.next();
                props.put(e.getKey(), of(e.getValue()));
            }
            s.properties = props;
            s.required = List.copyOf(props.keySet());
            s.additionalSaid = false;
            s.listed = !props.isEmpty();
        }
        s.enumValues = List.of(v);
        return s;
    }

    static boolean integral(JsonNode v) {
        return v.isIntegralNumber() || v.isNumber() && v.decimalValue().stripTrailingZeros().scale() <= 0;
    }

    /** Whether {@code v} satisfies {@code s}; a node still being compiled (recursion) is taken to match. */
    static boolean matches(Schema s, JsonNode v) {
        if (s == null || !s.filled) {
            return true;
        }
        if (!s.anyOf.isEmpty()) {
            for (Schema a : s.anyOf) {
                if (matches(a, v)) {
                    return true;
                }
            }
            return false;
        }
        if (v.isNull()) {
            return s.types.contains(Schema.Type.NULL);
        }
        if (v.isBoolean()) {
            return s.types.contains(Schema.Type.BOOLEAN) && (s.bool == null || s.bool == v.asBoolean());
        }
        if (v.isNumber()) {
            boolean typed = s.types.contains(Schema.Type.NUMBER) || s.types.contains(Schema.Type.INTEGER) && integral(v);
            return typed && (s.number == null || s.number.contains(v.decimalValue()));
        }
        if (v.isTextual()) {
            return s.types.contains(Schema.Type.STRING) && (s.string == null || s.string.matches(v.asText()));
        }
        if (v.isArray()) {
            if (!s.types.contains(Schema.Type.ARRAY) || v.size() < s.minItems || v.size() > s.maxItems) {
                return false;
            }
            for (int i = 0; i < v.size(); i++) {
                if (!matches(s.itemAt(i), v.get(i))) {
                    return false;
                }
            }
            return true;
        }
        if (!s.types.contains(Schema.Type.OBJECT) || v.size() < s.minProperties || v.size() > s.maxProperties) {
            return false;
        }
        for (String r : s.required) {
            if (!v.has(r)) {
                return false;
            }
        }
        for (var it = v.fields(); it.hasNext(); ) {
            var e = it.next();
            Schema p = s.properties.get(e.getKey());
            if (p == null && !s.additionalAllowed() || !matches(p != null ? p : s.additional, e.getValue())) {
                return false;
            }
        }
        return true;
    }
}

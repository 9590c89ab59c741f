package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Intersection (allOf, sibling keywords), complement (not) and provable disjointness (oneOf) of
 * compiled nodes. A simple node is a disjoint union over JSON types of per-type constraints, so
 * each is decided type by type; a union distributes.
 */
final class SchemaAlgebra {
    /** Alternatives one merge may produce (anyOf x anyOf multiplies): past it the schema is refused. */
    static final int MAX_ALTERNATIVES = 256;
    private static final int MAX_DISJOINT_DEPTH = 16;

    private SchemaAlgebra() {
    }

    private static List<Schema> alternatives(Schema s) {
        return s.anyOf.isEmpty() ? List.of(s) : s.anyOf;
    }

    private static boolean openForMerge(Schema s) {
        return s.additionalSaid == null || s.additionalSaid; // implicit closing is decided after merging
    }

    /** What {@code s} allows for key {@code k} while merging: never when the key is closed out. */
    private static Schema sideProperty(Schema s, String k) {
        Schema p = s.properties.get(k);
        if (p != null) {
            return p;
        }
        return openForMerge(s) ? (s.additional == null ? Schema.any() : s.additional) : Schema.never();
    }

    /** The values both admit. */
    static Schema and(Schema a, Schema b, String path) {
        if (a.isAny() || a == b) {
            return b;
        }
        if (b.isAny()) {
            return a;
        }
        if (!a.filled || !b.filled) {
            throw new SchemaCompiler.Unsupported("$ref", path, "a recursive reference is combined with other keywords before an object or array");
        }
        if (!a.anyOf.isEmpty() || !b.anyOf.isEmpty()) {
            List<Schema> as = alternatives(a), bs = alternatives(b);
            if ((long) as.size() * bs.size() > MAX_ALTERNATIVES) {
                throw new SchemaCompiler.Unsupported("anyOf", path, "more than " + MAX_ALTERNATIVES + " alternatives once merged");
            }
            List<Schema> out = new ArrayList<>();
            for (Schema x : as) {
                for (Schema y : bs) {
                    out.add(and(x, y, path));
                }
            }
            return SchemaCompiler.union(out);
        }
        Schema r = new Schema();
        r.types = EnumSet.noneOf(Schema.Type.class);
        r.types.addAll(a.types);
        r.types.retainAll(b.types);
        if (a.bool != null && b.bool != null && !a.bool.equals(b.bool)) {
            r.types.remove(Schema.Type.BOOLEAN);
        }
        r.bool = a.bool != null ? a.bool : b.bool;
        if (r.types.contains(Schema.Type.OBJECT)) {
            mergeObjects(a, b, r, path);
        }
        if (r.types.contains(Schema.Type.ARRAY)) {
            int n = Math.max(a.prefixItems.size(), b.prefixItems.size());
            List<Schema> prefix = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                prefix.add(and(orAny(a.itemAt(i)), orAny(b.itemAt(i)), path));
            }
            r.prefixItems = List.copyOf(prefix);
            Schema items = and(orAny(a.items), orAny(b.items), path);
            r.items = items.isAny() ? null : items;
            r.minItems = Math.max(a.minItems, b.minItems);
            r.maxItems = Math.min(a.maxItems, b.maxItems);
        }
        if (r.types.contains(Schema.Type.STRING)) {
            try {
                r.string = StringRule.and(a.string, b.string);
            } catch (IllegalArgumentException e) {
                throw new SchemaCompiler.Unsupported("pattern", path, e.getMessage());
            }
        }
        if (r.types.contains(Schema.Type.NUMBER) || r.types.contains(Schema.Type.INTEGER)) {
            r.number = NumberRule.and(a.number, b.number);
        }
        if (a.enumValues != null || b.enumValues != null) {
            List<JsonNode> values = new ArrayList<>();
            Schema other = a.enumValues != null ? b : a;
            for (JsonNode v : a.enumValues != null ? a.enumValues : b.enumValues) {
                if (SchemaValues.matches(other, v)) {
                    values.add(v);
                }
            }
            r.enumValues = List.copyOf(values);
        }
        return r;
    }

    private static Schema orAny(Schema s) {
        return s == null ? Schema.any() : s;
    }

    private static void mergeObjects(Schema a, Schema b, Schema r, String path) {
        Set<String> keys = new LinkedHashSet<>(a.properties.keySet());
        keys.addAll(b.properties.keySet());
        Map<String, Schema> props = new LinkedHashMap<>();
        for (String k : keys) {
            props.put(k, and(sideProperty(a, k), sideProperty(b, k), path + ".properties." + k));
        }
        r.properties = props;
        r.listed = a.listed || b.listed;
        if (a.additionalSaid != null || b.additionalSaid != null) {
            r.additionalSaid = openForMerge(a) && openForMerge(b);
        }
        if (Boolean.TRUE.equals(r.additionalSaid)) {
            Schema add = and(orAny(a.additional), orAny(b.additional), path + ".additionalProperties");
            r.additional = add.isAny() ? null : add;
        }
        Set<String> req = new LinkedHashSet<>(a.required);
        req.addAll(b.required);
        r.required = List.copyOf(req);
        r.minProperties = Math.max(a.minProperties, b.minProperties);
        r.maxProperties = Math.min(a.maxProperties, b.maxProperties);
    }

    /** The values {@code x} does not admit, where that is a node again; else {@link SchemaCompiler.Unsupported}. */
    static Schema not(Schema x) {
        String path = "not";
        if (!x.filled) {
            throw new SchemaCompiler.Unsupported("not", path, "of a recursive reference");
        }
        if (!x.anyOf.isEmpty()) {
            Schema r = Schema.any();
            for (Schema alt : x.anyOf) {
                r = and(r, not(alt), path);
            }
            return r;
        }
        Schema r = new Schema();
        for (Schema.Type t : x.types) {
            switch (t) {
                case NULL -> r.types.remove(t);
                case BOOLEAN -> {
                    if (x.bool == null) {
                        r.types.remove(t);
                    } else {
                        r.bool = !x.bool;
                    }
                }
                case STRING -> {
                    StringRule s = x.string;
                    if (s == null) {
                        r.types.remove(t);
                    } else if (s.dfa != null && s.minLength == 0 && s.maxLength == Integer.MAX_VALUE) {
                        r.string = new StringRule(s.dfa.not(), 0, Integer.MAX_VALUE);
                    } else if (s.dfa == null && s.maxLength == Integer.MAX_VALUE) {
                        r.string = new StringRule(null, 0, s.minLength - 1);
                    } else if (s.dfa == null && s.minLength == 0) {
                        r.string = new StringRule(null, s.maxLength + 1, Integer.MAX_VALUE);
                    } else {
                        throw new SchemaCompiler.Unsupported("not", path, "of a string with both a pattern and lengths, or both lengths");
                    }
                }
                case INTEGER, NUMBER -> {
                    if (x.number != null) {
                        throw new SchemaCompiler.Unsupported("not", path, "of numbers with bounds or values");
                    }
                    if (!x.types.contains(Schema.Type.NUMBER)) {
                        throw new SchemaCompiler.Unsupported("not", path, "of integer (the numbers that are not integers)");
                    }
                    r.types.remove(t);
                }
                case OBJECT -> {
                    if (!x.properties.isEmpty() || !x.required.isEmpty() || x.additional != null || Boolean.FALSE.equals(x.additionalSaid)
                            || x.minProperties > 0 || x.maxProperties < Integer.MAX_VALUE) {
                        throw new SchemaCompiler.Unsupported("not", path, "of an object schema");
                    }
                    r.types.remove(t);
                }
                case ARRAY -> {
                    if (x.items != null || !x.prefixItems.isEmpty() || x.minItems > 0 || x.maxItems < Integer.MAX_VALUE) {
                        throw new SchemaCompiler.Unsupported("not", path, "of an array schema");
                    }
                    r.types.remove(t);
                }
            }
        }
        return r;
    }

    /** Null when the branches are pairwise provably disjoint, else which two may overlap. */
    static String overlap(List<Schema> branches) {
        for (int i = 0; i < branches.size(); i++) {
            for (int j = i + 1; j < branches.size(); j++) {
                if (!disjoint(branches.get(i), branches.get(j), 0)) {
                    return "branches " + i + " and " + j + " may both match";
                }
            }
        }
        return null;
    }

    private static boolean disjoint(Schema a, Schema b, int depth) {
        if (!a.filled || !b.filled || depth > MAX_DISJOINT_DEPTH) {
            return false;
        }
        if (!a.anyOf.isEmpty() || !b.anyOf.isEmpty()) {
            for (Schema x : alternatives(a)) {
                for (Schema y : alternatives(b)) {
                    if (!disjoint(x, y, depth + 1)) {
                        return false;
                    }
                }
            }
            return true;
        }
        if (noneMatch(a.enumValues, b) || noneMatch(b.enumValues, a)) {
            return true;
        }
        Set<Schema.Type> common = EnumSet.noneOf(Schema.Type.class);
        common.addAll(a.types);
        common.retainAll(b.types);
        for (Schema.Type t : common) {
            boolean apart = switch (t) {
                case BOOLEAN -> a.bool != null && b.bool != null && !a.bool.equals(b.bool);
                case OBJECT -> objectsDisjoint(a, b, depth) || objectsDisjoint(b, a, depth);
                default -> false;
            };
            if (!apart) {
                return false;
            }
        }
        return true;
    }

    private static boolean noneMatch(List<JsonNode> values, Schema other) {
        return values != null && values.stream().noneMatch(v -> SchemaValues.matches(other, v));
    }

    /** A key {@code a} requires whose values in {@code a} and {@code b} are disjoint (a discriminator). */
    private static boolean objectsDisjoint(Schema a, Schema b, int depth) {
        for (String k : a.required) {
            if (disjoint(sideProperty(a, k), sideProperty(b, k), depth + 1)) {
                return true;
            }
        }
        return false;
    }
}

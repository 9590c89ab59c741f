package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.TextNode;

import java.math.BigDecimal;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * JSON schema to {@link Schema} nodes (the keywords and their meaning are listed there). Strict
 * compilation refuses what it cannot enforce, naming the keyword and where; lenient compilation
 * leaves that keyword alone unchecked and enforces the rest of its subschema.
 */
final class SchemaCompiler {
    static final Set<String> KEYWORDS = Set.of("type", "nullable", "properties", "required", "additionalProperties", "minProperties", "maxProperties",
            "items", "prefixItems", "additionalItems", "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "$defs",
            "definitions", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf");
    static final Set<String> ANNOTATIONS = Set.of("title", "description", "default", "examples", "$schema", "$id", "$anchor", "$comment", "strict",
            "deprecated", "readOnly", "writeOnly", "discriminator", "contentEncoding", "contentMediaType", "example", "x-order");

    /** A keyword (or a use of one) that constrained decoding does not enforce: refused in strict, left unchecked in lenient. */
    static final class Unsupported extends IllegalArgumentException {
        Unsupported(String keyword, String path, String why) {
            super("JSON schema keyword '" + keyword + "' at " + path + " is not supported by constrained decoding" + (why.isEmpty() ? "" : ": " + why));
        }
    }

    private final JsonNode root;
    private final boolean strict;
    private final Map<String, Schema> refs = new HashMap<>(); // JSON pointer -> its node (unfilled while being compiled)

    private SchemaCompiler(JsonNode root, boolean strict) {
        this.root = root;
        this.strict = strict;
    }

    static Schema compile(JsonNode s, boolean strict) {
        SchemaCompiler c = new SchemaCompiler(s, strict);
        Schema root = c.ref("#", "$");
        SchemaPrune.prune(root);
        if (!root.satisfiable()) {
            throw new IllegalArgumentException("schema at $ admits no value" + SchemaPrune.why(root, "$"));
        }
        return root;
    }

    /** The node of a local JSON pointer ({@code #}, {@code #/$defs/X}, ...), compiled once; recursion meets the unfilled node. */
    private Schema ref(String pointer, String path) {
        Schema known = refs.get(pointer);
        if (known != null) {
            return known;
        }
        if (!pointer.startsWith("#")) {
            throw new Unsupported("$ref", path, "only local references (#...) are resolved, not " + new TextNode(pointer));
        }
        JsonNode target;
        String at = URLDecoder.decode(pointer.substring(1), StandardCharsets.UTF_8);
        if (at.isEmpty()) {
            target = root;
        } else if (at.startsWith("/")) {
            target = root.at(at);
            if (target.isMissingNode()) {
                throw new IllegalArgumentException("$ref " + new TextNode(pointer) + " at " + path + " points at nothing");
            }
        } else {
            throw new Unsupported("$ref", path, "anchors (" + new TextNode(pointer) + ") are not resolved");
        }
        Schema node = new Schema();
        node.filled = false;
        refs.put(pointer, node);
        Schema content = compile(target, pointer.equals("#") ? "$" : pointer);
        if (content == node || !content.filled) {
            throw new IllegalArgumentException("$ref " + new TextNode(pointer) + " at " + path + " refers only to itself");
        }
        node.become(content);
        return node;
    }

    private Schema compile(JsonNode s, String path) {
        if (s == null || s.isBoolean() && s.asBoolean()) {
            return Schema.any();
        }
        if (s.isBoolean()) {
            return Schema.never();
        }
        if (!s.isObject()) {
            if (!strict) {
                return Schema.any();
            }
            throw new IllegalArgumentException("schema at " + path + " must be an object");
        }
        for (var names = s.fieldNames(); names.hasNext(); ) {
            String k = names.next();
            boolean noConstraint = k.equals("uniqueItems") && !s.get(k).asBoolean(true);
            if (!KEYWORDS.contains(k) && !ANNOTATIONS.contains(k) && !noConstraint && strict) {
                throw new Unsupported(k, path, "");
            }
        }
        List<Schema> parts = new ArrayList<>();
        Schema local = local(s, path);
        if (!local.isAny()) {
            parts.add(local);
        }
        if (s.has("$ref")) {
            guard("$ref", path, () -> parts.add(ref(s.get("$ref").asText(), path)));
        }
        if (s.has("allOf")) {
            int i = 0;
            for (JsonNode part : list(s, "allOf", path)) {
                parts.add(compile(part, path + ".allOf[" + i++ + "]"));
            }
        }
        if (s.has("anyOf")) {
            parts.add(union(alternatives(s, "anyOf", path)));
        }
        if (s.has("oneOf")) {
            List<Schema> alts = alternatives(s, "oneOf", path);
            guard("oneOf", path, () -> {
                String overlap = SchemaAlgebra.overlap(alts);
                if (overlap != null) {
                    throw new Unsupported("oneOf", path, overlap + " (exclusivity is enforced only where the branches are provably disjoint)");
                }
            });
            parts.add(union(alts)); // lenient: read as anyOf
        }
        if (s.has("const")) {
            parts.add(SchemaValues.ofValues(List.of(s.get("const"))));
        } else if (s.has("enum")) {
            List<JsonNode> values = new ArrayList<>();
            list(s, "enum", path).forEach(values::add);
            parts.add(SchemaValues.ofValues(values));
        }
        if (s.has("not")) {
            Schema inner = compile(s.get("not"), path + ".not");
            guard("not", path, () -> parts.add(SchemaAlgebra.not(inner)));
        }
        Schema result = Schema.any();
        for (Schema p : parts) {
            try {
                result = SchemaAlgebra.and(result, p, path);
            } catch (Unsupported e) {
                if (strict) {
                    throw e;
                }
            }
        }
        return result;
    }

    /** Runs the reading of one keyword: in lenient mode, a keyword it cannot enforce is skipped alone. */
    private void guard(String keyword, String path, Runnable read) {
        try {
            read.run();
        } catch (Unsupported e) {
            if (strict) {
                throw e;
            }
        }
    }

    private static JsonNode list(JsonNode s, String key, String path) {
        JsonNode l = s.get(key);
        if (!l.isArray() || l.isEmpty()) {
            throw new IllegalArgumentException(path + "." + key + " must be a non-empty list");
        }
        return l;
    }

    private List<Schema> alternatives(JsonNode s, String key, String path) {
        List<Schema> alts = new ArrayList<>();
        int i = 0;
        for (JsonNode alt : list(s, key, path)) {
            alts.add(compile(alt, path + "." + key + "[" + i++ + "]"));
        }
        return alts;
    }

    static Schema union(List<Schema> alts) {
        List<Schema> flat = new ArrayList<>();
        for (Schema a : alts) {
            if (a.filled && !a.anyOf.isEmpty()) {
                flat.addAll(a.anyOf);
            } else {
                flat.add(a);
            }
        }
        if (flat.size() == 1) {
            return flat.getFirst();
        }
        Schema u = Schema.never();
        u.anyOf = List.copyOf(flat);
        List<JsonNode> values = new ArrayList<>();
        for (Schema a : flat) {
            u.types.addAll(a.types);
            if (values != null && a.filled && a.enumValues != null) {
                values.addAll(a.enumValues);
            } else {
                values = null;
            }
        }
        u.enumValues = values == null ? null : List.copyOf(values);
        return u;
    }

    /** The keywords of this node alone: types and the per-type constraints. */
    private Schema local(JsonNode s, String path) {
        Schema n = new Schema();
        JsonNode t = s.get("type");
        if (t != null) {
            Set<Schema.Type> types = EnumSet.noneOf(Schema.Type.class);
            for (JsonNode one : t.isArray() ? t : List.of(t)) {
                try {
                    types.add(Schema.Type.valueOf(one.asText().toUpperCase(Locale.ROOT)));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("unknown JSON schema type '" + one.asText() + "' at " + path);
                }
            }
            if (types.isEmpty()) {
                throw new IllegalArgumentException("schema at " + path + " allows no type");
            }
            n.types = types;
        }
        if (s.path("nullable").asBoolean(false)) {
            n.types.add(Schema.Type.NULL);
        }
        if (n.types.contains(Schema.Type.NUMBER)) {
            n.types.add(Schema.Type.INTEGER);
        }
        objectKeywords(s, path, n);
        arrayKeywords(s, path, n);
        stringKeywords(s, path, n);
        numberKeywords(s, path, n);
        if (s.has("uniqueItems") && s.get("uniqueItems").asBoolean(false) && strict) {
            throw new Unsupported("uniqueItems", path, "");
        }
        return n;
    }

    private void objectKeywords(JsonNode s, String path, Schema n) {
        Map<String, Schema> props = new LinkedHashMap<>();
        JsonNode properties = s.get("properties");
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
        if (properties != null) {
            if (!properties.isObject()) {
                throw new IllegalArgumentException(path + ".properties must be an object");
            }
            for (var it = properties.fields(); it.hasNext(); ) {
                var e = it.next();
                if (e.getKey().chars().anyMatch(ch -> ch < 0x20)) {
                    // such a name could only be written as an escape, which the recognizer does not resolve in keys
                    if (strict) {
                        throw new IllegalArgumentException("property name " + new TextNode(e.getKey()) + " at " + path + " contains a control character");
                    }
                    required.remove(e.getKey());
                    continue;
                }
                props.put(e.getKey(), compile(e.getValue(), path + ".properties." + e.getKey()));
            }
            n.listed = !props.isEmpty();
        }
        JsonNode ap = s.get("additionalProperties");
        if (ap != null) {
            n.additionalSaid = !ap.isBoolean() || ap.asBoolean();
            n.additional = ap.isObject() ? compile(ap, path + ".additionalProperties") : null;
        } else {
            for (String r : required) {
                props.putIfAbsent(r, Schema.any()); // implicitly closed: required names are taken too
            }
        }
        n.properties = props;
        n.required = List.copyOf(required);
        n.minProperties = count(s, "minProperties", path, 0);
        n.maxProperties = count(s, "maxProperties", path, Integer.MAX_VALUE);
    }

    private void arrayKeywords(JsonNode s, String path, Schema n) {
        JsonNode items = s.get("items");
        List<Schema> prefix = new ArrayList<>();
        if (items != null && items.isArray()) { // drafts before 2020-12: a tuple, the rest in additionalItems
            int i = 0;
            for (JsonNode it : items) {
                prefix.add(compile(it, path + ".items[" + i++ + "]"));
            }
            if (s.has("additionalItems")) {
                n.items = compile(s.get("additionalItems"), path + ".additionalItems");
            }
        } else {
            if (s.has("prefixItems")) {
                int i = 0;
                for (JsonNode it : s.get("prefixItems")) {
                    prefix.add(compile(it, path + ".prefixItems[" + i++ + "]"));
                }
            }
            if (items != null) {
                n.items = compile(items, path + ".items");
            }
        }
        n.prefixItems = List.copyOf(prefix);
        n.minItems = count(s, "minItems", path, 0);
        n.maxItems = count(s, "maxItems", path, Integer.MAX_VALUE);
    }

    private static int count(JsonNode s, String key, String path, int absent) {
        JsonNode v = s.get(key);
        if (v == null) {
            return absent;
        }
        if (!v.isNumber() || v.asDouble() < 0 || v.asDouble() != Math.floor(v.asDouble())) {
            throw new IllegalArgumentException(path + "." + key + " must be a non-negative integer, got " + v);
        }
        return v.asDouble() >= Integer.MAX_VALUE ? Integer.MAX_VALUE : v.asInt();
    }

    private void stringKeywords(JsonNode s, String path, Schema n) {
        int min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, Integer.MAX_VALUE);
        StringRule rule = min > 0 || max < Integer.MAX_VALUE ? new StringRule(null, min, max) : null;
        if (s.has("pattern")) {
            String p = s.get("pattern").asText();
            StringRule[] holder = {null};
            guard("pattern", path, () -> {
                try {
                    holder[0] = new StringRule(Dfa.pattern(p), 0, Integer.MAX_VALUE);
                } catch (IllegalArgumentException e) {
                    throw new Unsupported("pattern", path, e.getMessage());
                }
            });
            rule = StringRule.and(rule, holder[0]);
        }
        if (s.has("format")) {
            rule = StringRule.and(rule, Formats.rule(s.get("format").asText()));
        }
        if (rule != null && rule.dfa != null && rule.minLength > 0) {
            StringRule r = rule;
            StringRule[] holder = {r};
            guard("minLength", path, () -> {
                try {
                    holder[0] = new StringRule(r.dfa, r.minLength, r.maxLength);
                } catch (IllegalArgumentException e) {
                    throw new Unsupported("minLength", path, e.getMessage());
                }
            });
            rule = holder[0];
        }
        n.string = rule;
    }

    private void numberKeywords(JsonNode s, String path, Schema n) {
        BigDecimal min = decimal(s, "minimum", path), max = decimal(s, "maximum", path);
        boolean minEx = false, maxEx = false;
        JsonNode exMin = s.get("exclusiveMinimum"), exMax = s.get("exclusiveMaximum");
        if (exMin != null && exMin.isBoolean()) { // draft 4: a flag on minimum
            minEx = exMin.asBoolean() && min != null;
        } else if (exMin != null) {
            BigDecimal v = decimal(s, "exclusiveMinimum", path);
            if (min == null || v.compareTo(min) >= 0) {
                min = v;
                minEx = true;
            }
        }
        if (exMax != null && exMax.isBoolean()) {
            maxEx = exMax.asBoolean() && max != null;
        } else if (exMax != null) {
            BigDecimal v = decimal(s, "exclusiveMaximum", path);
            if (max == null || v.compareTo(max) <= 0) {
                max = v;
                maxEx = true;
            }
        }
        BigDecimal multiple = decimal(s, "multipleOf", path);
        if (multiple != null && multiple.signum() <= 0) {
            throw new IllegalArgumentException(path + ".multipleOf must be positive");
        }
        if (min != null || max != null || multiple != null) {
            n.number = new NumberRule(min, minEx, max, maxEx, multiple == null ? null : multiple.stripTrailingZeros());
        }
    }

    private static BigDecimal decimal(JsonNode s, String key, String path) {
        JsonNode v = s.get(key);
        if (v == null) {
            return null;
        }
        if (!v.isNumber()) {
            throw new IllegalArgumentException(path + "." + key + " must be a number, got " + v);
        }
        return v.decimalValue();
    }
}

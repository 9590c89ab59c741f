package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Random instances of a JSON schema (mostly valid: they are judged by the validator, not assumed
 * valid), random mutations of them, and random walks of a recognizer. Numbers are written plainly
 * (no exponent, few digits) and strings come from the formats' and patterns' example pools, so a
 * valid instance is within what the recognizer writes.
 */
final class SchemaInstances {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    static final Map<String, List<String>> FORMAT_EXAMPLES = Map.of(
            "date-time", List.of("2024-02-29T13:45:00Z", "1999-12-31T23:59:59.5+01:00"),
            "date", List.of("2024-01-31", "2000-02-29"),
            "time", List.of("08:30:00Z", "23:59:59-05:00"),
            "email", List.of("a.b@example.com", "x+y@mail.io"),
            "uuid", List.of("123e4567-e89b-12d3-a456-426614174000"),
            "ipv4", List.of("10.0.0.1", "255.255.255.255"),
            "ipv6", List.of("::1", "2001:db8::8a2e:370:7334"),
            "hostname", List.of("example.com", "a-b.c-d.org"),
            "duration", List.of("P1D", "PT1H30M", "P3W"));
    /** Patterns of the generated schemas, each with strings it matches. */
    static final Map<String, List<String>> PATTERN_EXAMPLES = Map.of( // at most 10 entries (Map.of)
            "^[a-z]+$", List.of("abc", "z"),
            "^[A-Z]{2}-\\d{3}$", List.of("AB-123"),
            "cat|dog", List.of("cat", "a dog!", "hotdog"),
            "^(ab)*c?$", List.of("", "abab", "abc", "c"),
            "^\\w+@\\w+$", List.of("a@b", "x_1@y"),
            "^[0-9]{5}$", List.of("12345", "00501"),
            "^(?!ab)(?=.*c)[a-c]{2,4}$", List.of("bc", "cab", "acb"));
    private static final String TEXT = "ab zé\"\\\n/\t\u00e9\uD83D\uDE00xyZ0";

    private final JsonNode root;
    private final SplittableRandom rnd;

    SchemaInstances(JsonNode root, SplittableRandom rnd) {
        this.root = root;
        this.rnd = rnd;
    }

    private <T> T pick(List<T> l) {
        return l.get(rnd.nextInt(l.size()));
    }

    JsonNode instance(JsonNode s, int depth) {
        if (s == null || s.isBoolean()) {
            return F.numberNode(rnd.nextInt(5));
        }
        if (s.has("$ref")) {
            String p = s.get("$ref").asText().substring(1);
            return instance(p.isEmpty() ? root : root.at(p), depth + 1);
        }
        if (s.has("const")) {
            return s.get("const");
        }
        if (s.has("enum")) {
            List<JsonNode> values = new ArrayList<>();
            s.get("enum").forEach(values::add);
            return pick(values);
        }
        for (String k : List.of("anyOf", "oneOf")) {
            if (s.has(k)) {
                List<JsonNode> alts = new ArrayList<>();
                s.get(k).forEach(alts::add);
                if (depth > 4) { // recursion: take the branch without a reference
                    alts.removeIf(a -> a.has("$ref"));
                }
                return instance(alts.isEmpty() ? s.get(k).get(0) : merged(s, pick(alts), k), depth + 1);
            }
        }
        if (s.has("allOf")) {
            ObjectNode m = s.deepCopy();
            m.remove("allOf");
            for (JsonNode part : s.get("allOf")) {
                part.fields().forEachRemaining(e -> m.putIfAbsent(e.getKey(), e.getValue()));
            }
            return instance(m, depth + 1);
        }
        String type = type(s);
        return switch (type) {
            case "null" -> F.nullNode();
            case "boolean" -> F.booleanNode(rnd.nextBoolean());
            case "integer", "number" -> number(s, type.equals("integer"));
            case "string" -> F.textNode(string(s));
            case "array" -> array(s, depth);
            default -> object(s, depth);
        };
    }

    /** A branch with the siblings it sits among (shallow: the branch's own keywords win). */
    private static JsonNode merged(JsonNode s, JsonNode branch, String key) {
        ObjectNode m = branch.deepCopy();
        s.fields().forEachRemaining(e -> {
            if (!e.getKey().equals(key)) {
                m.putIfAbsent(e.getKey(), e.getValue());
            }
        });
        return m;
    }

    private String type(JsonNode s) {
        JsonNode t = s.get("type");
        if (t == null) {
            if (s.has("properties") || s.has("required")) {
                return "object";
            }
            if (s.has("items") || s.has("prefixItems")) {
                return "array";
            }
            if (s.has("pattern") || s.has("format") || s.has("minLength")) {
                return "string";
            }
            return s.has("minimum") || s.has("maximum") ? "number" : pick(List.of("null", "boolean", "integer", "string", "array", "object"));
        }
        if (t.isArray()) {
            List<String> ts = new ArrayList<>();
            t.forEach(x -> ts.add(x.asText()));
            return pick(ts);
        }
        return t.asText();
    }

    private JsonNode number(JsonNode s, boolean integer) {
        double lo = s.has("minimum") ? s.get("minimum").asDouble() : s.has("exclusiveMinimum") ? s.get("exclusiveMinimum").asDouble() : -50;
        double hi = s.has("maximum") ? s.get("maximum").asDouble() : s.has("exclusiveMaximum") ? s.get("exclusiveMaximum").asDouble() : 50;
        lo = Math.max(lo, -1e6);
        hi = Math.min(hi, 1e6);
        double v = lo + rnd.nextDouble() * Math.max(0, hi - lo);
        BigDecimal d;
        if (s.has("multipleOf")) {
            BigDecimal m = s.get("multipleOf").decimalValue();
            d = BigDecimal.valueOf(Math.ceil(v / m.doubleValue())).multiply(m);
        } else {
            d = integer ? BigDecimal.valueOf(Math.round(v)) : BigDecimal.valueOf(Math.round(v * 100) / 100.0);
        }
        d = d.stripTrailingZeros();
        if (d.scale() < 0) {
            d = d.setScale(0);
        }
        return integer || d.scale() == 0 ? F.numberNode(d.toBigInteger()) : F.numberNode(d);
    }

    private String string(JsonNode s) {
        if (s.has("format") && FORMAT_EXAMPLES.containsKey(s.get("format").asText())) {
            return pick(FORMAT_EXAMPLES.get(s.get("format").asText()));
        }
        if (s.has("pattern") && PATTERN_EXAMPLES.containsKey(s.get("pattern").asText())) {
            return pick(PATTERN_EXAMPLES.get(s.get("pattern").asText()));
        }
        int min = s.path("minLength").asInt(0), max = Math.min(s.path("maxLength").asInt(8), min + 8);
        int n = min + rnd.nextInt(Math.max(1, max - min + 1));
        StringBuilder b = new StringBuilder();
        int[] cps = TEXT.codePoints().toArray();
        for (int i = 0; i < n; i++) {
            b.appendCodePoint(cps[rnd.nextInt(cps.length)]);
        }
        return b.toString();
    }

    private JsonNode array(JsonNode s, int depth) {
        ArrayNode a = F.arrayNode();
        int min = s.path("minItems").asInt(0), max = Math.min(s.path("maxItems").asInt(min + 3), min + 3);
        int n = depth > 5 ? min : min + rnd.nextInt(max - min + 1);
        JsonNode prefix = s.get("prefixItems");
        for (int i = 0; i < n; i++) {
            JsonNode itemSchema = prefix != null && i < prefix.size() ? prefix.get(i) : s.get("items");
            if (itemSchema != null && itemSchema.isBoolean() && !itemSchema.asBoolean()) {
                break;
            }
            a.add(instance(itemSchema, depth + 1));
        }
        return a;
    }

    private JsonNode object(JsonNode s, int depth) {
        ObjectNode o = F.objectNode();
        JsonNode props = s.path("properties");
        List<String> required = new ArrayList<>();
        s.path("required").forEach(r -> required.add(r.asText()));
        props.fieldNames().forEachRemaining(k -> {
            if (required.contains(k) || depth < 5 && rnd.nextBoolean()) {
                o.set(k, instance(props.get(k), depth + 1));
            }
        });
        for (String r : required) {
            if (!o.has(r)) {
                o.set(r, instance(s.path("additionalProperties").isObject() ? s.get("additionalProperties") : null, depth + 1));
            }
        }
        if (s.path("additionalProperties").isObject() && rnd.nextBoolean()) {
            o.set("extra", instance(s.get("additionalProperties"), depth + 1));
        }
        return o;
    }

    private static final List<JsonNode> POOL = List.of(F.numberNode(0), F.numberNode(-7), F.numberNode(new BigDecimal("2.5")), F.numberNode(100000),
            F.textNode("x"), F.textNode(""), F.textNode("2024-01-31"), F.textNode("abc"), F.booleanNode(true), F.nullNode(), F.arrayNode(),
            F.objectNode());

    /** {@code v} with one random change: a node replaced by a pool value, a key removed or added, an item appended. */
    JsonNode mutate(JsonNode v) {
        JsonNode copy = v.deepCopy();
        List<JsonNode> containers = new ArrayList<>();
        collect(copy, containers);
        if (containers.isEmpty() || rnd.nextInt(5) == 0) {
            return pick(POOL);
        }
        JsonNode c = pick(containers);
        if (c instanceof ObjectNode o) {
            List<String> keys = new ArrayList<>();
            o.fieldNames().forEachRemaining(keys::add);
            switch (keys.isEmpty() ? 2 : rnd.nextInt(3)) {
                case 0 -> o.set(pick(keys), pick(POOL));
                case 1 -> o.remove(pick(keys));
                default -> o.set(pick(List.of("zz", "extra", "a")), pick(POOL));
            }
        } else if (c instanceof ArrayNode a) {
            if (!a.isEmpty() && rnd.nextBoolean()) {
                a.set(rnd.nextInt(a.size()), pick(POOL));
            } else {
                a.add(a.isEmpty() ? pick(POOL) : a.get(a.size() - 1).deepCopy());
            }
        }
        return copy;
    }

    private static void collect(JsonNode n, List<JsonNode> out) {
        if (n.isContainerNode()) {
            out.add(n);
            n.forEach(c -> collect(c, out));
        }
    }

    private static final String WALK_CHARS = "{}[],:\" \n-0123456789.eE+abcdefghijklmnopqrstuvwxyzACBTZPDHMSW_@/\\\u00e9";

    /**
     * A text the recognizer accepts, built by stepping it with random characters it takes
     * (closing ones half the time); null when the walk ran past {@code maxLength}.
     */
    String walk(Schema schema, int maxLength) {
        Recognizer r = JsonRecognizer.start(schema);
        StringBuilder b = new StringBuilder();
        while (b.length() < maxLength) {
            if (r.accepting() && rnd.nextInt(4) == 0) {
                return b.toString();
            }
            List<Character> ok = new ArrayList<>();
            List<Character> closing = new ArrayList<>();
            for (char c : WALK_CHARS.toCharArray()) {
                if (r.step(c) != null) {
                    ok.add(c);
                    if ("}]\",".indexOf(c) >= 0) {
                        closing.add(c);
                    }
                }
            }
            if (ok.isEmpty()) {
                return r.accepting() ? b.toString() : null;
            }
            char c = !closing.isEmpty() && rnd.nextInt(3) == 0 ? pick(closing) : pick(ok);
            r = r.step(c);
            b.append(c);
        }
        return null;
    }
}

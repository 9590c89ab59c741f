package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static dev.spindle.grammar.SchemaTesting.JSON;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random schemas over the enforced keywords, each checked against the networknt validator in both
 * directions ({@link SchemaAgreement}). One seed per trial ({@link Trials}: a failure names its seed,
 * {@code -Dspindle.seed=N} replays it); {@code -Dschema.trials=N} changes the number of trials.
 */
class SchemaPropertyTest {
    static final List<String> NAMES = List.of("a", "b", "name", "n", "items", "kind");

    @Test
    void recognizerAndValidatorAgree() {
        SchemaAgreement.Tally tally = new SchemaAgreement.Tally();
        int[] compiled = new int[2]; // compiled, admitting no value
        long t0 = System.nanoTime();
        Trials.run(Integer.getInteger("schema.trials", 250), rnd -> {
            JsonNode json = new Generator(rnd).root();
            Schema s;
            try {
                s = Schema.compile(json);
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage().contains("admits no value"), "refused " + json + ": " + e.getMessage());
                SchemaOracle oracle = new SchemaOracle(json);
                SchemaInstances gen = new SchemaInstances(json, rnd);
                for (int i = 0; i < 12; i++) {
                    String v = gen.instance(json, 0).toString();
                    assertTrue(!Boolean.TRUE.equals(oracle.judge(v)), "refused as admitting no value, yet " + v + " is valid for " + json);
                }
                compiled[1]++;
                return;
            }
            compiled[0]++;
            SchemaAgreement.check(json, s, rnd, 12, 6, tally, "schema " + json);
        });
        System.out.printf("[schema property] %d schemas compiled (%d admit no value), %d valid and %d invalid instances agreed, %d walks validated, %.1f s%n",
                compiled[0], compiled[1], tally.valid, tally.invalid, tally.walks, (System.nanoTime() - t0) / 1e9);
    }

    /** Random schemas: scalars with their rules, enums, arrays and tuples, objects (additionalProperties always given), combinators, references. */
    static final class Generator {
        private final SplittableRandom rnd;

        Generator(SplittableRandom rnd) {
            this.rnd = rnd;
        }

        private <T> T pick(List<T> l) {
            return l.get(rnd.nextInt(l.size()));
        }

        JsonNode root() {
            if (rnd.nextInt(6) == 0) { // a recursive list through $defs
                ObjectNode r = JSON.createObjectNode();
                ObjectNode l = r.putObject("$defs").putObject("L").put("type", "object").put("additionalProperties", false);
                ObjectNode p = l.putObject("properties");
                p.set("v", schema(1));
                ArrayNode any = p.putObject("next").putArray("anyOf");
                any.addObject().put("$ref", "#/$defs/L");
                any.addObject().put("type", "null");
                l.putArray("required").add("v").add("next");
                r.put("$ref", "#/$defs/L");
                return r;
            }
            return rnd.nextBoolean() ? object(2) : schema(2);
        }

        ObjectNode schema(int depth) {
            int kinds = depth > 0 ? 14 : 8;
            ObjectNode s = JSON.createObjectNode();
            switch (rnd.nextInt(kinds)) {
                case 0 -> {
                    s.put("type", "string");
                    if (rnd.nextBoolean()) {
                        s.put("minLength", rnd.nextInt(3));
                    }
                    if (rnd.nextBoolean()) {
                        s.put("maxLength", 2 + rnd.nextInt(6));
                    }
                    if (rnd.nextInt(3) == 0) {
                        s.put("pattern", pick(SchemaInstances.PATTERN_EXAMPLES.keySet().stream().sorted().toList()));
                    }
                }
                case 1 -> s.put("type", "string").put("format", pick(SchemaInstances.FORMAT_EXAMPLES.keySet().stream().sorted().toList()));
                case 2 -> {
                    s.put("type", "integer");
                    if (rnd.nextBoolean()) {
                        s.put(rnd.nextBoolean() ? "minimum" : "exclusiveMinimum", rnd.nextInt(21) - 10);
                    }
                    if (rnd.nextBoolean()) {
                        s.put(rnd.nextBoolean() ? "maximum" : "exclusiveMaximum", rnd.nextInt(40));
                    }
                    if (rnd.nextInt(3) == 0) {
                        s.put("multipleOf", 2 + rnd.nextInt(4));
                    }
                }
                case 3 -> {
                    s.put("type", "number");
                    if (rnd.nextBoolean()) {
                        s.put("minimum", rnd.nextInt(10) - 5 + 0.5);
                    }
                    if (rnd.nextBoolean()) {
                        s.put("exclusiveMaximum", rnd.nextInt(20));
                    }
                    if (rnd.nextInt(3) == 0) {
                        s.put("multipleOf", 0.5);
                    }
                }
                case 4 -> s.put("type", pick(List.of("boolean", "null")));
                case 5 -> {
                    ArrayNode e = s.putArray("enum");
                    for (int i = 0, n = 1 + rnd.nextInt(3); i < n; i++) {
                        e.add(pick(List.of(JSON.valueToTree(1), JSON.valueToTree(2.5), JSON.valueToTree("x"), JSON.valueToTree("y"),
                                JSON.nullNode(), JSON.valueToTree(true), JSON.valueToTree(List.of(1, "a")), JSON.valueToTree(java.util.Map.of("k", 1)))));
                    }
                    if (rnd.nextBoolean()) {
                        s.putArray("type").add("string").add("integer").add("null");
                    }
                }
                case 6 -> s.putArray("type").add(pick(List.of("string", "integer", "number"))).add("null");
                case 7 -> s.set("const", pick(List.of(JSON.valueToTree(3), JSON.valueToTree("c"), JSON.valueToTree(false))));
                case 8, 9 -> {
                    s.put("type", "array");
                    if (rnd.nextBoolean()) {
                        ArrayNode p = s.putArray("prefixItems");
                        p.add(schema(depth - 1));
                        if (rnd.nextBoolean()) {
                            p.add(schema(depth - 1));
                        }
                    }
                    if (rnd.nextInt(4) > 0) {
                        s.set("items", rnd.nextInt(5) == 0 ? JSON.getNodeFactory().booleanNode(false) : schema(depth - 1));
                    }
                    if (rnd.nextBoolean()) {
                        s.put("minItems", rnd.nextInt(2));
                    }
                    if (rnd.nextBoolean()) {
                        s.put("maxItems", 1 + rnd.nextInt(3));
                    }
                }
                case 10 -> s.setAll(object(depth - 1));
                case 11 -> {
                    ArrayNode any = s.putArray("anyOf");
                    any.add(schema(depth - 1));
                    any.add(schema(depth - 1));
                    if (rnd.nextBoolean()) {
                        s.putArray("type").add("string").add("integer").add("array").add("object");
                    }
                }
                case 12 -> {
                    ArrayNode one = s.putArray("oneOf");
                    List<String> types = new ArrayList<>(List.of("string", "integer", "boolean", "null", "array"));
                    for (int i = 0; i < 2; i++) {
                        ObjectNode b = schema(depth - 1);
                        b.put("type", types.remove(rnd.nextInt(types.size())));
                        one.add(b);
                    }
                }
                default -> {
                    if (rnd.nextBoolean()) {
                        ArrayNode all = s.putArray("allOf");
                        all.addObject().put("type", "integer").put("minimum", rnd.nextInt(10));
                        all.addObject().put("maximum", 5 + rnd.nextInt(20));
                    } else {
                        s.putObject("not").put("type", pick(List.of("string", "null", "boolean")));
                    }
                }
            }
            return s;
        }

        ObjectNode object(int depth) {
            ObjectNode s = JSON.createObjectNode().put("type", "object");
            ObjectNode p = s.putObject("properties");
            ArrayNode required = s.putArray("required");
            List<String> names = new ArrayList<>(NAMES);
            for (int i = 0, n = 1 + rnd.nextInt(3); i < n; i++) {
                String name = names.remove(rnd.nextInt(names.size()));
                p.set(name, depth > 0 ? schema(depth) : schema(0));
                if (rnd.nextBoolean()) {
                    required.add(name);
                }
            }
            switch (rnd.nextInt(3)) {
                case 0 -> s.put("additionalProperties", false);
                case 1 -> s.put("additionalProperties", true);
                default -> s.set("additionalProperties", schema(0));
            }
            if (rnd.nextInt(5) == 0) {
                s.put("maxProperties", required.size() + rnd.nextInt(2));
            }
            return s;
        }
    }
}

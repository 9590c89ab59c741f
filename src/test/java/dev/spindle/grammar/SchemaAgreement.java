package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The two directions checked against the validator for one schema: every instance the recognizer
 * accepts validates, and every valid instance (written compactly by Jackson) is accepted.
 */
final class SchemaAgreement {
    private static final java.util.function.Function<String, String> JSON_TEXT = t -> new com.fasterxml.jackson.databind.node.TextNode(t).toString();

    private SchemaAgreement() {
    }

    /** Counts of what was checked. */
    static final class Tally {
        int valid, invalid, walks;
    }

    static void check(JsonNode json, Schema compiled, SplittableRandom rnd, int instances, int walks, Tally tally, String label) {
        SchemaOracle oracle = new SchemaOracle(json), walkOracle = SchemaOracle.relaxed(json);
        SchemaInstances gen = new SchemaInstances(json, rnd);
        for (int i = 0; i < instances; i++) {
            JsonNode v = gen.instance(json, 0);
            for (JsonNode candidate : new JsonNode[]{v, gen.mutate(v)}) {
                String text = candidate.toString();
                Boolean verdict = oracle.judge(text);
                if (verdict == null) {
                    continue;
                }
                boolean valid = verdict;
                boolean accepted = SchemaTesting.accepts(compiled, text);
                assertEquals(valid, accepted, label + ": instance " + JSON_TEXT.apply(text) + (valid ? " is valid but refused" : " accepted but invalid: " + oracle.errors(text))
                        + " for schema " + json);
                if (valid) {
                    tally.valid++;
                } else {
                    tally.invalid++;
                }
            }
        }
        for (int i = 0; i < walks; i++) {
            String text = gen.walk(compiled, 600);
            if (text != null && walkOracle.judge(text) != null) {
                assertTrue(walkOracle.valid(text), label + ": walked " + JSON_TEXT.apply(text) + " is accepted but invalid: " + walkOracle.errors(text) + " for schema " + json);
                tally.walks++;
            }
        }
    }
}

package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.InputFormat;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SchemaRegistryConfig;
import com.networknt.schema.SpecificationVersion;

/**
 * The independent judge: networknt's validator (draft 2020-12, formats asserted). networknt also
 * checks the domains of formats email and hostname against the IANA list of top-level domains, a
 * policy no syntax (and no automaton the recognizer holds) enforces: {@link #relaxed} judges
 * without those two formats (for texts the recognizer wrote, whose domains are random), and the
 * unit tests check their syntax.
 */
final class SchemaOracle {
    private static final SchemaRegistry VALIDATOR = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12,
            b -> b.schemaRegistryConfig(SchemaRegistryConfig.builder().formatAssertionsEnabled(true).build()));

    private final com.networknt.schema.Schema schema;

    SchemaOracle(JsonNode schema) {
        this(schema, false);
    }

    private SchemaOracle(JsonNode schema, boolean relaxed) {
        this.schema = VALIDATOR.getSchema(closed(schema, relaxed).toString(), InputFormat.JSON);
    }

    static SchemaOracle relaxed(JsonNode schema) {
        return new SchemaOracle(schema, true);
    }

    boolean valid(String instance) {
        return schema.validate(instance, InputFormat.JSON).isEmpty();
    }

    /**
     * The verdict, or null where the validator cannot give one: it throws on a number past long's range
     * checked against an integer's bound (8e50 against exclusiveMaximum 3 of an integer branch).
     */
    Boolean judge(String instance) {
        try {
            return valid(instance);
        } catch (RuntimeException e) {
            return null;
        }
    }

    String errors(String instance) {
        return schema.validate(instance, InputFormat.JSON).toString();
    }

    /**
     * The schema with the implicit closing written out ({@link Schema}): additionalProperties false
     * where properties are listed and additionalProperties is not given (no allOf in the fixtures).
     */
    static JsonNode closed(JsonNode s, boolean relaxed) {
        JsonNode copy = s.deepCopy();
        if (copy instanceof ObjectNode o) {
            o.remove("$schema"); // the validator reads 2020-12; a dialect's address would have it fetch the meta-schema
        }
        close(copy, relaxed);
        return copy;
    }

    private static void close(JsonNode n, boolean relaxed) {
        if (relaxed && n instanceof ObjectNode o && o.has("format") && (o.get("format").asText().equals("email") || o.get("format").asText().equals("hostname"))) {
            o.remove("format");
        }
        if (n instanceof ObjectNode o && o.has("properties") && o.get("properties").isObject() && !o.get("properties").isEmpty()
                && !o.has("additionalProperties")) {
            o.put("additionalProperties", false);
        }
        if (n.isContainerNode()) {
            n.forEach(c -> close(c, relaxed));
        }
    }
}

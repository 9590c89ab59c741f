package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.InputStream;
import java.util.SplittableRandom;

import static dev.spindle.grammar.SchemaTesting.JSON;
import static dev.spindle.grammar.SchemaTesting.accepted;
import static dev.spindle.grammar.SchemaTesting.refused;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Schemas real clients send (src/test/resources/schemas): Pydantic v2 (nested model, recursive
 * model, Optional[int], discriminated union), zod (v4's toJSONSchema and zod-to-json-schema) and
 * an OpenAI strict-mode schema. Each compiles strictly and is enforced: instances drawn from it
 * and mutations of them are accepted exactly when the validator says they are valid.
 */
class SchemaFixturesTest {
    static JsonNode fixture(String name) throws IOException {
        try (InputStream in = SchemaFixturesTest.class.getResourceAsStream("/schemas/" + name)) {
            return JSON.readTree(in);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"pydantic-nested.json", "pydantic-recursive.json", "pydantic-optional-int.json", "pydantic-discriminated.json",
            "zod-v4.json", "zod-to-json-schema.json", "openai-strict.json"})
    void compilesStrictlyAndAgreesWithTheValidator(String name) throws IOException {
        JsonNode json = fixture(name);
        Schema s = Schema.compile(json);
        SchemaAgreement.Tally tally = new SchemaAgreement.Tally();
        SchemaAgreement.check(json, s, new SplittableRandom(name.hashCode()), 60, 30, tally, name);
        System.out.printf("[schema fixtures] %s: %d valid and %d invalid instances agreed, %d walks validated%n", name, tally.valid, tally.invalid, tally.walks);
        assertTrue(tally.valid >= 20, name + ": too few valid instances drawn (" + tally.valid + ")");
    }

    @Test
    void handWrittenDocuments() throws IOException {
        Schema nested = Schema.compile(fixture("pydantic-nested.json"));
        accepted(nested, """
                {"name": "Ada", "email": "ada@example.com", "address": {"street": "1 Main", "city": "X", "zip_code": "12345"}, "age": null}""");
        refused(nested, """
                {"name": "Ada", "email": "ada@example.com", "address": {"street": "1 Main", "city": "X", "zip_code": "1234"}}""");
        Schema tree = Schema.compile(fixture("pydantic-recursive.json"));
        accepted(tree, "{\"label\": \"root\", \"children\": [{\"label\": \"a\", \"children\": [{\"label\": \"b\", \"weight\": 0.5}]}]}");
        refused(tree, "{\"label\": \"root\", \"children\": [{\"weight\": 1}]}");
        Schema pets = Schema.compile(fixture("pydantic-discriminated.json"));
        accepted(pets, "{\"pet\": {\"pet_type\": \"dog\", \"barks\": 2.5}, \"n\": 1}");
        refused(pets, "{\"pet\": {\"pet_type\": \"dog\", \"meows\": 2}, \"n\": 1}");
        Schema zod = Schema.compile(fixture("zod-v4.json"));
        accepted(zod, "{\"n\": -9007199254740991, \"e\": \"large\"}");
        refused(zod, "{\"n\": 1.5, \"e\": \"large\"}", "{\"n\": 1, \"e\": \"huge\"}", "{\"n\": 1}");
        Schema openai = Schema.compile(fixture("openai-strict.json"));
        accepted(openai, """
                {"title": "t", "author_email": null, "rating": 5, "unit": "cm", "steps": [{"explanation": "e", "output": "o"}],
                 "box": {"w": 1, "h": 2, "inner": null}, "created": "2024-05-01T10:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000"}""");
        refused(openai, """
                {"title": "t", "author_email": null, "rating": 6, "unit": "cm", "steps": [], "box": null, "created": "2024-05-01T10:00:00Z",
                 "id": "123e4567-e89b-12d3-a456-426614174000"}""");
    }
}

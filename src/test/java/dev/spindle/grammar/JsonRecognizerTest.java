package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JsonRecognizerTest {
    static final ObjectMapper JSON = new ObjectMapper();

    static Schema schema(String s) throws Exception {
        return Schema.compile(JSON.readTree(s));
    }

    static boolean accepts(Schema s, String doc) {
        JsonRecognizer r = JsonRecognizer.start(s).feed(doc);
        return r != null && r.accepting();
    }

    static boolean prefix(Schema s, String doc) {
        return JsonRecognizer.start(s).feed(doc) != null;
    }

    @Test
    void objectsWithTypedRequiredProperties() throws Exception {
        Schema s = schema("""
                {"type": "object", "properties": {"answer": {"type": "integer"}, "unit": {"type": "string", "enum": ["m", "km"]},
                 "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                 "x": {"anyOf": [{"type": "null"}, {"type": "number"}]}}, "required": ["answer"], "additionalProperties": false}""");
        assertTrue(accepts(s, "{\"answer\": 85}"));
        assertTrue(accepts(s, " {\"answer\":-3, \"unit\": \"km\", \"ok\": true, \"tags\": [\"a\", \"b\\n\"], \"x\": 1.5e3}\n"));
        assertTrue(accepts(s, "{\"x\": null, \"answer\": 0}"));
        assertFalse(accepts(s, "{\"answer\": 85"), "incomplete");
        assertTrue(prefix(s, "{\"answer\": 85"));
        assertNull(JsonRecognizer.start(s).feed("{\"answer\": 8.5"), "integer refuses a fraction");
        assertNull(JsonRecognizer.start(s).feed("{\"unit\": \"mi"), "enum refuses other strings");
        assertNull(JsonRecognizer.start(s).feed("{\"extra"), "additionalProperties false refuses other keys");
        assertNull(JsonRecognizer.start(s).feed("{\"\\u2787answer\""), "nor spells one with an escape");
        assertNull(JsonRecognizer.start(s).feed("{\"\\n"), "an escaped character must still begin a property name");
        assertNull(JsonRecognizer.start(s).feed("{\"ok\": true}"), "required answer missing");
        assertNull(JsonRecognizer.start(s).feed("{\"answer\": 1, \"answer\""), "no duplicate keys");
        assertNull(JsonRecognizer.start(s).feed("{\"answer\": 1, \"tags\": [\"a\", \"b\", "), "maxItems");
        assertNull(JsonRecognizer.start(s).feed("{\"answer\": 01"), "JSON numbers have no leading zeros");
        assertNull(JsonRecognizer.start(s).feed("{\"answer\": 1} x"), "nothing after the document");
    }

    @Test
    void whitespaceAndNumbersAreBounded() throws Exception {
        Schema s = schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {\"type\": \"array\"}}}");
        assertTrue(accepts(s, "{\"a\":1}"), "no whitespace");
        assertTrue(accepts(s, "{\n    \"a\": 1,\n    \"b\": [\n        2\n    ]\n}"), "pretty-printed");
        assertNull(JsonRecognizer.start(s).feed("{\"a\": 6.06184\n\n"), "one newline between tokens at most");
        assertNull(JsonRecognizer.start(s).feed("{\"a\":  1"), "one space at most");
        assertNull(JsonRecognizer.start(s).feed("{\n" + " ".repeat(21)), "at most 20 spaces of indentation");
        assertNull(JsonRecognizer.start(s).feed("{\"a\": 1." + "1".repeat(17)), "fraction digits are bounded");
        assertNull(JsonRecognizer.start(s).feed("{\"a\": 1e123"), "exponent digits are bounded");
        assertTrue(accepts(s, "{\"a\": -9999999999999999.9999999999999999e+99}"), "the largest magnitude admitted");
        assertTrue(Double.isFinite(Double.parseDouble("9999999999999999.9999999999999999e+99")) && Double.parseDouble("0.0000000000000001e-99") > 0,
                "every admitted number is a finite double, non-zero unless written as zero");
        assertNull(JsonRecognizer.start(s).feed("{\"a\": 1}\n\n\n\n\n"), "at most 4 whitespace characters after the document");
        assertTrue(accepts(s, "\n\n{\"a\": 1}\n"), "a document framed by newlines");
    }

    @Test
    void nestingEscapesAndNamesThatCouldNotFinish() throws Exception {
        String deep = "[".repeat(JsonRecognizer.MAX_DEPTH);
        assertTrue(prefix(Schema.any(), deep), "nesting up to the bound");
        assertNull(JsonRecognizer.start(Schema.any()).feed(deep + "["), "and no deeper");
        JsonRecognizer at = JsonRecognizer.start(Schema.any()).feed(deep);
        assertEquals(at, JsonRecognizer.start(Schema.any()).feed(deep), "deep states compare (and hash) without recursion");
        assertEquals(at.hashCode(), JsonRecognizer.start(Schema.any()).feed(deep).hashCode());
        assertNull(JsonRecognizer.start(Schema.any()).feed("\"\\u\uFF21"), "hex digits are ASCII");
        assertTrue(accepts(Schema.any(), "\"\\u00e9\""));
        Schema named = schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"additionalProperties\": true}");
        assertNull(JsonRecognizer.start(named).feed("{\"a\": 1, \"\\u0061"), "no escaped spelling of a named key");
        assertTrue(prefix(Schema.anyObject(), "{\"\\u0061"), "where every key is free, escapes are");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> schema("{\"type\": \"object\", \"properties\": {\"a\\u0001\": {}}}"));
        assertTrue(e.getMessage().contains("control character"), e.getMessage());
    }

    @Test
    void propertiesComeFromTheSchema() throws Exception {
        Schema s = schema("{\"type\": \"object\", \"properties\": {\"unit\": {\"type\": \"string\"}}, \"required\": [\"unit\"]}");
        assertNull(JsonRecognizer.start(s).feed("{\"answer\""), "listed properties close the object unless additionalProperties says otherwise");
        assertTrue(accepts(s, "{\"unit\": \"m\"}"));
        Schema open = schema("{\"type\": \"object\", \"properties\": {\"unit\": {\"type\": \"string\"}}, \"additionalProperties\": true}");
        assertTrue(accepts(open, "{\"answer\": 1}"));
        assertTrue(accepts(schema("{\"type\": \"object\"}"), "{\"any\": [1]}"), "an object without properties takes any keys");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> schema("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"], \"additionalProperties\": false}"));
        assertTrue(e.getMessage().contains("'b'"), e.getMessage());
    }

    @Test
    void anyJsonAndTopLevelScalars() throws Exception {
        assertTrue(accepts(Schema.any(), "[1, {\"a\": [true, false, null]}, \"s\\u00e9\"]"));
        assertTrue(accepts(Schema.any(), "42"));
        assertTrue(accepts(schema("{\"const\": \"yes\"}"), "\"yes\""));
        assertFalse(prefix(Schema.anyObject(), "["));
    }

    @Test
    void unsupportedKeywordsAreNamed() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> schema("{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}"));
        assertTrue(e.getMessage().contains("'pattern'") && e.getMessage().contains("backreference"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> schema("{\"type\": \"array\", \"uniqueItems\": true}"));
        assertTrue(e.getMessage().contains("'uniqueItems'"), e.getMessage());
    }

    /** The mask over the bundled model's whole vocabulary, and what it costs per decode step. */
    @Test
    void maskOverTheVocabulary() throws Exception {
        TokenTexts texts = TokenTexts.load(Path.of("models/spindle-chat-target/tokenizer.json"), 4096);
        Schema s = schema("{\"type\": \"object\", \"properties\": {\"answer\": {\"type\": \"integer\"}}, \"required\": [\"answer\"], \"additionalProperties\": false}");
        GrammarConstraint c = new GrammarConstraint(s, texts, Set.of(4001), -1);
        float[] logits = new float[4096];
        int allowed = c.mask(logits);
        assertTrue(allowed > 0 && allowed < 200, "few tokens can start the object: " + allowed);
        assertEquals(Float.NEGATIVE_INFINITY, logits[4001], "no end of turn before the document is complete");
        for (int i = 0; i < 200; i++) {
            c.mask(new float[4096]); // warm up
        }
        long t0 = System.nanoTime();
        int n = 200;
        for (int i = 0; i < n; i++) {
            c.mask(new float[4096]);
        }
        double ms = (System.nanoTime() - t0) / 1e6 / n;
        System.out.printf("[grammar] masking 4,096 tokens takes %.3f ms per decode step%n", ms);
        JsonNode unused = JSON.createObjectNode();
        assertNotNull(unused);
    }
}

package dev.spindle.grammar;

import org.junit.jupiter.api.Test;

import static dev.spindle.grammar.SchemaTesting.accepted;
import static dev.spindle.grammar.SchemaTesting.lenient;
import static dev.spindle.grammar.SchemaTesting.refused;
import static dev.spindle.grammar.SchemaTesting.refusedAt;
import static dev.spindle.grammar.SchemaTesting.refusedAtEnd;
import static dev.spindle.grammar.SchemaTesting.strict;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** $ref, $defs / definitions, recursion, allOf, anyOf with siblings, oneOf, not. */
class SchemaReferencesTest {
    @Test
    void localReferencesAndRootReference() {
        Schema s = strict("""
                {"$defs": {"Inner": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}},
                 "type": "object", "properties": {"x": {"$ref": "#/$defs/Inner"}}, "required": ["x"]}""");
        accepted(s, "{\"x\": {\"v\": 1}}");
        refusedAt(s, "{\"x\": {\"v\": \"a\"}}", 12);
        refused(s, "{\"x\": {}}");
        Schema root = strict("""
                {"$ref": "#/definitions/P", "definitions": {"P": {"type": "object", "properties": {"n": {"type": "string"}},
                 "required": ["n"], "additionalProperties": false}}}""");
        accepted(root, "{\"n\": \"a\"}");
        refusedAt(root, "[", 0);
        refusedAt(root, "{\"m", 2);
        Schema escaped = strict("{\"$defs\": {\"a/b\": {\"type\": \"null\"}}, \"$ref\": \"#/$defs/a~1b\"}");
        accepted(escaped, "null");
        refused(escaped, "1");
    }

    @Test
    void recursiveSchemas() {
        Schema tree = strict("""
                {"$defs": {"Node": {"type": "object", "properties": {"value": {"type": "integer"},
                  "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["value", "children"],
                  "additionalProperties": false}}, "$ref": "#/$defs/Node"}""");
        accepted(tree, "{\"value\": 1, \"children\": []}", "{\"value\": 1, \"children\": [{\"value\": 2, \"children\": [{\"value\": 3, \"children\": []}]}]}");
        refusedAtEnd(tree, "{\"value\": 1, \"children\": [{\"value\": 2, \"children\": [{\"x");
        Schema list = strict("""
                {"type": "object", "properties": {"head": {"type": "string"}, "tail": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                 "required": ["head", "tail"]}""");
        accepted(list, "{\"head\": \"a\", \"tail\": {\"head\": \"b\", \"tail\": null}}");
        refused(list, "{\"head\": \"a\", \"tail\": {\"head\": \"b\"}}");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> strict("""
                {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}"""));
        assertTrue(e.getMessage().contains("admits no value"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> strict("{\"$defs\": {\"A\": {\"$ref\": \"#/$defs/A\"}}, \"$ref\": \"#/$defs/A\"}"));
    }

    @Test
    void allOfMergesIntoOneSchema() {
        Schema s = strict("""
                {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                           {"properties": {"b": {"type": "string"}}, "required": ["b"]}, {"properties": {"a": {"minimum": 0}}}]}""");
        accepted(s, "{\"a\": 1, \"b\": \"x\"}", "{\"b\": \"x\", \"a\": 0}");
        refused(s, "{\"a\": 1}", "{\"a\": -1, \"b\": \"x\"}");
        refusedAt(s, "{\"a\": 1, \"c\"", 10); // closed implicitly after merging: a and b
        Schema ref = strict("""
                {"$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
                 "allOf": [{"$ref": "#/$defs/Base"}], "description": "pydantic v1 style"}""");
        accepted(ref, "{\"id\": 3}");
    }

    @Test
    void anyOfSiblingsApplyToEachBranch() {
        Schema s = strict("""
                {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"],
                 "anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}""");
        accepted(s, "{\"kind\": \"x\", \"a\": 1}", "{\"kind\": \"x\", \"b\": true}");
        refused(s, "{\"a\": 1}", "{\"kind\": \"x\"}");
        Schema typed = strict("{\"type\": \"string\", \"anyOf\": [{\"maxLength\": 2}, {\"pattern\": \"^z\"}]}");
        accepted(typed, "\"ab\"", "\"zzzz\"");
        refused(typed, "\"abc\"", "1");
    }

    @Test
    void oneOfIsEnforcedWhereDisjointAndRefusedOtherwise() {
        Schema tagged = strict("""
                {"oneOf": [{"type": "object", "properties": {"pet": {"const": "cat"}, "meows": {"type": "boolean"}}, "required": ["pet"]},
                           {"type": "object", "properties": {"pet": {"const": "dog"}, "barks": {"type": "boolean"}}, "required": ["pet"]}],
                 "discriminator": {"propertyName": "pet"}}""");
        accepted(tagged, "{\"pet\": \"cat\", \"meows\": true}", "{\"pet\": \"dog\"}");
        refused(tagged, "{\"pet\": \"cat\", \"barks\": true}");
        accepted(strict("{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}"), "\"a\"", "1");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> strict("{\"oneOf\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}"));
        assertTrue(e.getMessage().contains("'oneOf'"), e.getMessage());
        Schema loose = lenient("{\"oneOf\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}");
        accepted(loose, "1.5", "2");
        refused(loose, "\"a\"");
    }

    @Test
    void notWhereDecidable() {
        Schema s = strict("{\"not\": {\"type\": [\"string\", \"null\"]}}");
        accepted(s, "1", "true", "[]");
        refused(s, "\"a\"", "null");
        Schema e = strict("{\"type\": \"string\", \"not\": {\"enum\": [\"a\", \"b\"]}}");
        accepted(e, "\"c\"", "\"ab\"", "\"\"");
        refused(e, "\"a\"", "\"\\u0062\"");
        Schema p = strict("{\"type\": \"string\", \"not\": {\"pattern\": \"x\"}}");
        accepted(p, "\"abc\"");
        refused(p, "\"axc\"");
        IllegalArgumentException err = assertThrows(IllegalArgumentException.class, () -> strict("{\"not\": {\"type\": \"integer\"}}"));
        assertTrue(err.getMessage().contains("'not'"), err.getMessage());
        accepted(lenient("{\"type\": \"integer\", \"not\": {\"type\": \"integer\"}, \"maximum\": 3}"), "3");
        refused(lenient("{\"type\": \"integer\", \"not\": {\"type\": \"integer\"}, \"maximum\": 3}"), "4");
    }

    @Test
    void validSchemasAreNotRefusedAsContradictory() {
        Schema s = strict("{\"properties\": {\"a\": {}}, \"required\": [\"b\"]}");
        accepted(s, "{\"b\": 1}", "{\"a\": [], \"b\": {}}", "3", "\"x\"");
        refused(s, "{\"a\": 1}", "{\"b\": 1, \"c\": 2}");
        Schema partly = strict("""
                {"type": ["object", "string"], "properties": {"a": {}}, "required": ["b"], "additionalProperties": false}""");
        accepted(partly, "\"only strings\"");
        refusedAt(partly, "{", 0);
        Schema impossibleKey = strict("""
                {"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 2}, "b": {"type": "integer"}}}""");
        accepted(impossibleKey, "{\"b\": 1}", "{}");
        refusedAt(impossibleKey, "{\"a", 2);
    }

    @Test
    void lenientLeavesOnlyTheUnsupportedKeywordUnchecked() {
        Schema s = lenient("""
                {"type": "object", "properties": {"a": {"type": "integer", "if": {"minimum": 3}, "then": {"maximum": 5}},
                 "b": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}, "c": {"$ref": "https://example.com/x"}},
                 "required": ["a"], "patternProperties": {"^x": {}}}""");
        accepted(s, "{\"a\": 9, \"b\": [\"x\", \"x\"], \"c\": {\"any\": 1}}");
        refused(s, "{\"a\": \"9\"}", "{\"b\": [1]}", "{\"a\": 1, \"d\": 1}");
        Schema root = lenient("{\"$defs\": {\"T\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}, \"required\": [\"q\"]}}, \"$ref\": \"#/$defs/T\"}");
        refused(root, "{\"x\": 1}", "[]");
        accepted(root, "{\"q\": \"s\"}");
        for (String k : new String[]{"if", "patternProperties", "uniqueItems", "contains"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> strict("{\"" + k + "\": true}"));
            assertTrue(e.getMessage().contains("'" + k + "'"), e.getMessage());
        }
    }
}

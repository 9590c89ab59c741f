package dev.spindle.grammar;

import org.junit.jupiter.api.Test;

import static dev.spindle.grammar.SchemaTesting.accepted;
import static dev.spindle.grammar.SchemaTesting.refused;
import static dev.spindle.grammar.SchemaTesting.refusedAtEnd;
import static dev.spindle.grammar.SchemaTesting.strict;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** enum / const, pattern, lengths, formats, numeric bounds, tuples, property counts. */
class SchemaValueRulesTest {
    @Test
    void enumAndConstAreValuesNotSpellings() {
        Schema n = strict("{\"enum\": [1, \"a\", {\"a\": 1, \"b\": [true, null]}]}");
        accepted(n, "1", "1.0", "1.00", "\"a\"", "\"\\u0061\"", "{\"b\": [true, null], \"a\": 1}", "{\"a\":1.0,\"b\":[true,null]}");
        refused(n, "2", "1.5", "\"b\"", "{\"a\": 1}", "{\"a\": 1, \"b\": [true]}");
        refusedAtEnd(n, "10");
        Schema typed = strict("{\"type\": \"integer\", \"enum\": [1, 2.5, \"x\", 3]}");
        accepted(typed, "1", "3");
        refused(typed, "2.5", "\"x\"");
        assertThrows(IllegalArgumentException.class, () -> strict("{\"type\": \"string\", \"enum\": [1, 2]}"));
        Schema strings = strict("{\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}");
        assertTrue(strings.stringOnly(), "a string enum stays a raw-text tool parameter");
        assertEquals(2, strings.enumValues().size());
        accepted(strict("{\"const\": false}"), "false");
        refused(strict("{\"const\": false}"), "true");
    }

    @Test
    void patternsStepOnDecodedCharacters() {
        Schema s = strict("{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{3,4}$\"}");
        accepted(s, "\"AB-123\"", "\"XY-1234\"", "\"\\u0041B-123\"");
        refusedAtEnd(s, "\"a");
        refusedAtEnd(s, "\"AB-12\"");
        refusedAtEnd(s, "\"AB-12345");
        Schema search = strict("{\"type\": \"string\", \"pattern\": \"cat|dog\"}");
        accepted(search, "\"a cat!\"", "\"dog\"", "\"hotdogs\"");
        refusedAtEnd(search, "\"a bird\"");
        Schema groups = strict("{\"type\": \"string\", \"pattern\": \"^(?:ab)+(x|y)?\\\\s\\\\w*$\"}");
        accepted(groups, "\"abab z_9\"", "\"abx\\t\"");
        refused(groups, "\"aba \"", "\"ab-\"");
        Schema dot = strict("{\"type\": \"string\", \"pattern\": \"^.$\"}");
        accepted(dot, "\"\uD83D\uDE00\"", "\"\\ud83d\\ude00\"", "\"é\"");
        refused(dot, "\"ab\"", "\"\\n\"");
        Schema zodEmail = strict("""
                {"type": "string", "format": "email",
                 "pattern": "^(?!\\\\.)(?!.*\\\\.\\\\.)([A-Za-z0-9_'+\\\\-\\\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\\\-]*\\\\.)+[A-Za-z]{2,}$"}""");
        accepted(zodEmail, "\"a.b@example.com\"", "\"x_y+z@mail.co.uk\"");
        refused(zodEmail, "\".a@example.com\"", "\"a..b@example.com\"", "\"a@example.c\"");
        accepted(strict("{\"type\": \"string\", \"pattern\": \"^(?=.*[0-9])[a-z0-9]{3}$\"}"), "\"ab1\"");
        refused(strict("{\"type\": \"string\", \"pattern\": \"^(?=.*[0-9])[a-z0-9]{3}$\"}"), "\"abc\"");
        for (String bad : new String[]{"a(?=a)", "\\\\b", "(a)\\\\1", "(?<!a)b", "^(?=a)b|c"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> strict("{\"type\": \"string\", \"pattern\": \"" + bad + "\"}"));
            assertTrue(e.getMessage().contains("'pattern'"), e.getMessage());
        }
    }

    @Test
    void lengthsCountCodePoints() {
        Schema s = strict("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}");
        accepted(s, "\"ab\"", "\"abc\"", "\"\uD83D\uDE00\uD83D\uDE00\"", "\"\\u00e9\\n\"");
        refusedAtEnd(s, "\"a\"");
        refusedAtEnd(s, "\"abcd");
        Schema both = strict("{\"type\": \"string\", \"pattern\": \"^a+$\", \"minLength\": 3}");
        accepted(both, "\"aaa\"", "\"aaaa\"");
        refusedAtEnd(both, "\"aa\"");
        Schema even = strict("{\"type\": \"string\", \"pattern\": \"^(ab)*$\", \"maxLength\": 5}");
        accepted(even, "\"abab\"");
        refusedAtEnd(even, "\"ababa"); // no completion of length <= 5 with an even length past 4
    }

    @Test
    void formats() {
        Schema dt = strict("{\"type\": \"string\", \"format\": \"date-time\"}");
        accepted(dt, "\"2024-02-29T13:45:00Z\"", "\"1999-12-31T23:59:59.123+05:30\"");
        refused(dt, "\"2023-02-29T13:45:00Z\"", "\"2024-13-01T00:00:00Z\"", "\"2024-01-01 00:00:00Z\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"date\"}"), "\"2000-02-29\"");
        refused(strict("{\"type\": \"string\", \"format\": \"date\"}"), "\"1900-02-29\"", "\"2024-04-31\"");
        accepted(strict("{\"format\": \"time\"}"), "\"08:30:00Z\"", "3");
        accepted(strict("{\"type\": \"string\", \"format\": \"duration\"}"), "\"P1Y2M3DT4H5M6S\"", "\"PT0S\"", "\"P2W\"");
        refused(strict("{\"type\": \"string\", \"format\": \"duration\"}"), "\"P\"", "\"PT\"", "\"P1H\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"email\"}"), "\"a.b+c@example.com\"");
        refused(strict("{\"type\": \"string\", \"format\": \"email\"}"), "\"a@\"", "\"@b.c\"", "\"a b@c\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"hostname\"}"), "\"api.example-1.com\"");
        refused(strict("{\"type\": \"string\", \"format\": \"hostname\"}"), "\"-a.com\"", "\"a..b\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"ipv4\"}"), "\"192.168.0.255\"");
        refused(strict("{\"type\": \"string\", \"format\": \"ipv4\"}"), "\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"ipv6\"}"), "\"::1\"", "\"2001:db8::ff00:42:8329\"", "\"::ffff:192.0.2.1\"", "\"1:2:3:4:5:6:7:8\"");
        refused(strict("{\"type\": \"string\", \"format\": \"ipv6\"}"), "\"1:2:3:4:5:6:7:8:9\"", "\"1::2::3\"", "\":1\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"uuid\"}"), "\"123e4567-e89b-12d3-a456-426614174000\"");
        refused(strict("{\"type\": \"string\", \"format\": \"uuid\"}"), "\"123e4567e89b12d3a456426614174000\"");
        accepted(strict("{\"type\": \"string\", \"format\": \"uri\"}"), "\"not checked\"");
        assertTrue(!strict("{\"type\": \"string\", \"format\": \"uuid\"}").stringOnly(), "an enforced format is written as a JSON string");
    }

    @Test
    void numericBounds() {
        Schema i = strict("{\"type\": \"integer\", \"minimum\": 10, \"maximum\": 20}");
        accepted(i, "10", "15", "20");
        refused(i, "9", "21", "-15", "1e1");
        refusedAtEnd(i, "3");
        refusedAtEnd(i, "21");
        refusedAtEnd(i, "-");
        Schema x = strict("{\"type\": \"number\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 1}");
        accepted(x, "0.5", "0.0001", "0.9999999999999999");
        refused(x, "0", "1", "1.0", "0.0");
        refusedAtEnd(x, "1"); // no completion of 1 is below 1
        refusedAtEnd(x, "-");
        Schema m = strict("{\"type\": \"number\", \"multipleOf\": 0.25, \"minimum\": -1, \"maximum\": 1}");
        accepted(m, "0.75", "-1", "1.00", "0");
        refused(m, "0.3", "1.25");
        refusedAtEnd(m, "0.3");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> strict("{\"type\": \"integer\", \"multipleOf\": 7, \"minimum\": 8, \"maximum\": 13}"));
        assertTrue(e.getMessage().contains("admits no value"), e.getMessage());
        Schema safe = strict("{\"type\": \"integer\", \"minimum\": -9007199254740991, \"maximum\": 9007199254740991}");
        accepted(safe, "9007199254740991", "-3");
        refused(safe, "9007199254740992");
    }

    @Test
    void tuplesCountsAndAdditionalSchemas() {
        Schema t = strict("{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"integer\"}], \"items\": {\"type\": \"boolean\"}, \"minItems\": 1}");
        accepted(t, "[\"a\"]", "[\"a\", 1]", "[\"a\", 1, true, false]");
        refused(t, "[]", "[1]", "[\"a\", \"b\"]", "[\"a\", 1, 2]");
        Schema closed = strict("{\"type\": \"array\", \"prefixItems\": [{\"type\": \"null\"}], \"items\": false}");
        accepted(closed, "[null]", "[]");
        refusedAtEnd(closed, "[null,");
        Schema ap = strict("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"additionalProperties\": {\"type\": \"integer\"}}");
        accepted(ap, "{\"a\": \"x\", \"b\": 1, \"c\": 2}");
        refused(ap, "{\"b\": \"x\"}", "{\"a\": 1}");
        Schema counts = strict("{\"type\": \"object\", \"minProperties\": 1, \"maxProperties\": 2, \"required\": [\"r\"]}");
        accepted(counts, "{\"r\": 1}", "{\"x\": 1, \"r\": 2}");
        refused(counts, "{}", "{\"x\": 1}");
        refusedAtEnd(counts, "{\"x\": 1, \"y");
    }
}

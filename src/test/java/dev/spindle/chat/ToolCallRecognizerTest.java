package dev.spindle.chat;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.grammar.Schema;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ToolCallRecognizerTest {
    static Schema schema(String s) throws Exception {
        return Schema.compile(new ObjectMapper().readTree(s));
    }

    static Map<String, Schema> tools() throws Exception {
        Map<String, Schema> t = new LinkedHashMap<>();
        t.put("get_weather", schema("""
                {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Lima"]},
                 "unit": {"type": "string", "enum": ["kelvin", "rankine"]}, "days": {"type": "integer"},
                 "note": {"type": "string"}, "opts": {"type": "object", "properties": {"hourly": {"type": "boolean"}}}},
                 "required": ["city"]}"""));
        t.put("get_time", schema("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}"));
        return t;
    }

    static final String CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";
    static final String TIME = "<tool_call>\n<function=get_time>\n<parameter=city>\nNew York\n</parameter>\n</function>\n</tool_call>";

    @Test
    void acceptsWellFormedCalls() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.forced(tools(), true);
        assertTrue(r.feed("\n\n" + CALL).accepting());
        assertTrue(r.feed(CALL + "\n" + TIME).accepting());
        assertFalse(r.feed(CALL.substring(0, 40)).accepting());
        assertTrue(r.feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n<parameter=opts>\n{\"hourly\": true}\n</parameter>\n"
                + "<parameter=note>\nmulti\nline text, a > b\n</parameter>\n</function>\n</tool_call>").accepting());
    }

    /** A string with a pattern or format is no raw text: it is written as a JSON string, where its rule is enforced. */
    @Test
    void constrainedStringsAreJsonStrings() throws Exception {
        Schema params = schema("""
                {"$defs": {"Day": {"type": "string", "format": "date"}}, "type": "object",
                 "properties": {"day": {"$ref": "#/$defs/Day"}, "code": {"type": "string", "pattern": "^[A-Z]{2}$"}, "n": {"type": "integer", "maximum": 9}},
                 "required": ["day"], "additionalProperties": false}""");
        assertFalse(params.properties().get("day").stringOnly());
        ToolCallRecognizer r = ToolCallRecognizer.forced(Map.of("plan", params), false);
        String open = "<tool_call>\n<function=plan>\n";
        assertTrue(r.feed(open + "<parameter=day>\n\"2024-02-29\"\n</parameter>\n<parameter=code>\n\"AB\"\n</parameter>\n"
                + "<parameter=n>\n9\n</parameter>\n</function>\n</tool_call>").accepting());
        assertNull(r.feed(open + "<parameter=day>\n2024"), "not raw text");
        assertNull(r.feed(open + "<parameter=day>\n\"2023-02-29"), "the date is checked");
        assertNull(r.feed(open + "<parameter=day>\n\"2024-01-01\"\n</parameter>\n<parameter=code>\n\"ABC"), "the pattern is checked");
        assertNull(r.feed(open + "<parameter=day>\n\"2024-01-01\"\n</parameter>\n<parameter=n>\n10"), "the bound is checked");
    }

    @Test
    void valuesFollowTheirSchemas() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.forced(tools(), true);
        String open = "<tool_call>\n<function=get_weather>\n";
        assertNull(r.feed(open + "<parameter=city>\nParis"), "a string enum takes only its values");
        assertNull(r.feed(open + "<parameter=city>\nOslo * 528"), "nothing after an enum value");
        assertNull(r.feed(open + "<parameter=city>\nOslo\n</parameter>\n<parameter=unit>\nfahrenheit"), "the unit enum");
        assertNull(r.feed(open + "<parameter=days>\ntwo"), "an integer is JSON digits");
        assertNull(r.feed(open + "<parameter=days>\n2.5"), "an integer has no fraction");
        assertNull(r.feed(open + "<parameter=days>\n" + "1".repeat(17)), "an integer's digits are bounded");
        assertNull(r.feed(open + "<parameter=opts>\n{\"daily\""), "nested objects take their schema's keys");
        assertNull(r.feed(open + "<parameter=note>\nsee </think>"), "a string value cannot swallow the turn's markup");
        assertNull(r.feed(open + "<parameter=note>\nx</parameter>"), "the closing tag only on its own line");
        assertNull(r.feed(open + "<parameter=note>\nx <tool_call>"), "no call inside a value");
        assertNotNull(r.feed(open + "<parameter=note>\nx </parame"), "a partial tag is still text");
        assertNotNull(r.feed(open + "<parameter=note>\nif a < b then </div>"), "other markup is text");
    }

    @Test
    void refusesWhatTheToolsDoNotAllow() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.forced(tools(), true);
        assertNull(r.feed("Sure! <tool_call>"), "no text before a forced call");
        assertNull(r.feed("<tool_call>\n<function=launch"), "unknown function");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=country"), "unknown parameter");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>"), "required city missing");
        assertNull(r.feed(CALL.replace("<parameter=days>\n2\n</parameter>\n", "<parameter=city>\nLima\n</parameter>\n")), "each parameter once");
        assertNull(ToolCallRecognizer.forced(tools(), false).feed(CALL + "\n<tool_call>"), "one call only");
    }

    @Test
    void namesTheFormatCannotHoldAreRefused() throws Exception {
        Map<String, Schema> bad = Map.of("f", schema("{\"type\": \"object\", \"properties\": {\"x>y\": {\"type\": \"string\"}}}"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> ToolCallRecognizer.forced(bad, true));
        org.junit.jupiter.api.Assertions.assertNotNull(ToolCallRecognizer.unwritableName(Map.of("a<b", Schema.anyObject())));
        org.junit.jupiter.api.Assertions.assertNull(ToolCallRecognizer.unwritableName(tools()));
    }

    @Test
    void lazyCallsStartAtTheTag() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.lazy(tools(), true);
        assertTrue(r.accepting(), "no call at all is a reply");
        assertTrue(r.feed("The weather is fine, no tool needed.").accepting());
        assertTrue(r.feed("Let me check.\n\n" + CALL).accepting());
        assertFalse(r.feed("Let me check.\n\n" + CALL.substring(0, 30)).accepting(), "an opened call must be finished");
        assertNull(r.feed("Let me check.\n\n<tool_call>\n<function=launch"), "once opened, only offered functions");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis"), "and their schemas");
        assertTrue(r.feed(CALL + "\n" + TIME).accepting(), "parallel calls");
        assertNull(ToolCallRecognizer.lazy(tools(), false).feed(CALL + "\n<"), "parallel_tool_calls false: one call");
        assertNull(r.feed(CALL + " and more text"), "nothing but calls after a call");
    }
}

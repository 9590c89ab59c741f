package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ToolCallRecognizerTest {
    static Map<String, ToolCallRecognizer.Function> tools() throws Exception {
        Schema days = Schema.compile(new ObjectMapper().readTree("{\"type\": \"integer\"}"));
        return Map.of(
                "get_weather", new ToolCallRecognizer.Function(Map.of("city", Schema.any(), "days", days), Set.of("city"), List.of("city")),
                "get_time", new ToolCallRecognizer.Function(Map.of("city", Schema.any()), Set.of("city"), List.of("city")));
    }

    static final String CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";

    @Test
    void acceptsWellFormedCalls() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.start(tools(), true);
        assertTrue(r.feed("\n\n" + CALL).accepting());
        assertTrue(r.feed(CALL + "\n" + CALL.replace("get_weather", "get_time").replace("<parameter=days>\n2\n</parameter>\n", "")).accepting());
        assertFalse(r.feed(CALL.substring(0, 40)).accepting());
        assertTrue(r.feed("<tool_call>\n<function=get_time>\n<parameter=city>\nmulti\nline </parameter> text\n</parameter>\n</function>\n</tool_call>").accepting(),
                "string values are free text, closing tags inside a line included");
        assertNull(r.feed("<tool_call>\n<function=get_time>\n<parameter=city>\nA\n</parameter>\nB"), "a string value ends at the first \\n</parameter>\\n");
    }

    @Test
    void refusesWhatTheToolsDoNotAllow() throws Exception {
        ToolCallRecognizer r = ToolCallRecognizer.start(tools(), true);
        assertNull(r.feed("Sure! <tool_call>"), "no text before the call");
        assertNull(r.feed("<tool_call>\n<function=launch"), "unknown function");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=country"), "unknown parameter");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\ntwo"), "typed value must be JSON of its type");
        assertNull(r.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>"), "required city missing");
        assertNull(ToolCallRecognizer.start(tools(), false).feed(CALL + "\n<tool_call>"), "a named choice makes exactly one call");
    }
}

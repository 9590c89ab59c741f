package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolCallDelta;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Responses writer returns each call as the client offered its tool: a namespaced function under its
 * own name with its namespace, a custom tool as a {@code custom_tool_call} carrying the raw input (announced
 * whole by its input events, no JSON argument events), {@code local_shell} as an exec action; and the same
 * items sent back as input render the calls the model made.
 */
class ResponseWriterToolsTest {
    static final ObjectMapper JSON = new ObjectMapper();

    static ResponsesTools tools() throws Exception {
        return ResponsesTools.parse(JSON.readTree("""
                [{"type": "namespace", "name": "mcp__weather__", "description": "Weather tools.", "tools": [
                   {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]},
                 {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "regex", "definition": "[a-z]+"}},
                 {"type": "local_shell"},
                 {"type": "function", "name": "get_time"}]"""), new ArrayList<>());
    }

    /** The events a call of {@code name} with {@code args} writes, and the finished item. */
    static List<JsonNode> write(ResponsesTools tools, String name, String args) throws Exception {
        ResponseWriter w = new ResponseWriter(false, tools);
        int cut = args.length() / 2;
        w.step(new ParsedDelta("", "", List.of(), List.of(new ToolCallDelta(0, "call_1", name, ""), new ToolCallDelta(0, null, null, args.substring(0, cut)))));
        w.step(new ParsedDelta("", "", List.of(new ToolCall(0, "call_1", name, args)), List.of(new ToolCallDelta(0, null, null, args.substring(cut)))));
        w.finish(false);
        List<JsonNode> events = new ArrayList<>();
        for (String frame : w.drain()) {
            events.add(JSON.readTree(frame.substring(frame.indexOf("data: ") + 6)));
        }
        events.add(w.output().get(0));
        return events;
    }

    static List<String> types(List<JsonNode> events) {
        return events.subList(0, events.size() - 1).stream().map(e -> e.get("type").asText()).toList();
    }

    @Test
    void offeredToolsAreFunctionsUnderFlatNames() throws Exception {
        ResponsesTools t = tools();
        List<String> names = new ArrayList<>();
        t.chatTools().forEach(x -> names.add(x.path("function").path("name").asText()));
        assertEquals(List.of("mcp__weather__get_weather", "apply_patch", "local_shell", "get_time"), names);
        JsonNode input = t.chatTools().get(1).path("function").path("parameters").path("properties").path("input");
        assertEquals("string", input.path("type").asText());
        assertEquals("^([a-z]+)$", input.path("pattern").asText(), "a regex grammar is the input's pattern");
        assertTrue(t.chatTools().get(0).path("function").path("description").asText().contains("Weather tools."), "the namespace's description reaches the model");
        assertEquals("a__b", ResponsesTools.flatName("a", "b"));
        assertEquals("a_b", ResponsesTools.flatName("a_", "b"));
    }

    @Test
    void aNamespacedCallComesBackUnderItsNamespace() throws Exception {
        List<JsonNode> e = write(tools(), "mcp__weather__get_weather", "{\"city\":\"Madrid\"}");
        JsonNode item = e.getLast();
        assertEquals("function_call", item.get("type").asText());
        assertEquals("get_weather", item.get("name").asText());
        assertEquals("mcp__weather__", item.get("namespace").asText());
        assertEquals("{\"city\":\"Madrid\"}", item.get("arguments").asText());
        assertEquals("completed", item.get("status").asText());
        assertTrue(types(e).contains("response.function_call_arguments.delta"));

        // sent back as input: the model's own call, under the name it wrote
        com.fasterxml.jackson.databind.node.ArrayNode messages = JSON.createArrayNode();
        ResponsesRequest.items(JSON.createArrayNode().add(item), messages);
        assertEquals("mcp__weather__get_weather", messages.get(0).path("tool_calls").get(0).path("function").path("name").asText());
    }

    @Test
    void aCustomToolCallCarriesItsRawInput() throws Exception {
        List<JsonNode> e = write(tools(), "apply_patch", "{\"input\":\"*** Begin Patch\\nhello\\n\"}");
        JsonNode item = e.getLast();
        assertEquals("custom_tool_call", item.get("type").asText());
        assertEquals("apply_patch", item.get("name").asText());
        assertEquals("*** Begin Patch\nhello\n", item.get("input").asText());
        assertFalse(item.has("arguments"));
        assertFalse(types(e).contains("response.function_call_arguments.delta"), "no JSON argument events for a custom tool: " + types(e));
        assertTrue(types(e).containsAll(List.of("response.custom_tool_call_input.delta", "response.custom_tool_call_input.done")), types(e).toString());
        JsonNode added = e.getFirst().get("item");
        assertEquals("in_progress", added.get("status").asText());
        assertEquals("", added.get("input").asText());

        com.fasterxml.jackson.databind.node.ArrayNode messages = JSON.createArrayNode();
        ResponsesRequest.items(JSON.createArrayNode().add(item), messages);
        JsonNode args = JSON.readTree(messages.get(0).path("tool_calls").get(0).path("function").path("arguments").asText());
        assertEquals("*** Begin Patch\nhello\n", args.get("input").asText(), "sent back, the input is the call's one parameter again");
    }

    @Test
    void aLocalShellCallIsAnExecAction() throws Exception {
        JsonNode item = write(tools(), "local_shell", "{\"command\":[\"ls\",\"-la\"],\"workdir\":\"/tmp\"}").getLast();
        assertEquals("local_shell_call", item.get("type").asText());
        assertEquals("exec", item.path("action").path("type").asText());
        assertEquals("[\"ls\",\"-la\"]", item.path("action").path("command").toString());
        assertEquals("/tmp", item.path("action").path("working_directory").asText());
        com.fasterxml.jackson.databind.node.ArrayNode messages = JSON.createArrayNode();
        ResponsesRequest.items(JSON.createArrayNode().add(item), messages);
        JsonNode args = JSON.readTree(messages.get(0).path("tool_calls").get(0).path("function").path("arguments").asText());
        assertEquals("[\"ls\",\"-la\"]", args.get("command").toString());
    }

    @Test
    void aCallCutOffIsIncomplete() throws Exception {
        ResponseWriter w = new ResponseWriter(false, tools());
        w.step(new ParsedDelta("", "", List.of(), List.of(new ToolCallDelta(0, "call_1", "apply_patch", ""), new ToolCallDelta(0, null, null, "{\"inp"))));
        w.finish(true);
        assertEquals("incomplete", w.output().get(0).get("status").asText());
    }
}

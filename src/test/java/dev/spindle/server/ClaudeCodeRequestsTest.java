package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.RestAssured;
import io.restassured.response.Response;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URL;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Anthropic Messages requests shaped as Claude Code 2.x sends them (its fields, a system-role message
 * inside {@code messages}, beta headers, {@code context_management}, {@code output_config}, a 32,000-token
 * {@code max_tokens}), and context editing's clearing and report.
 */
@QuarkusTest
class ClaudeCodeRequestsTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/v1")
    URL v1;

    @BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    RequestSpecification http() {
        return RestAssured.given().baseUri(v1.toString().replaceAll("/v1/?$", "")).contentType("application/json")
                .header("anthropic-version", "2023-06-01")
                .header("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,effort-2025-11-24");
    }

    static ObjectNode weatherTool() throws Exception {
        return (ObjectNode) JSON.readTree("{\"name\": \"get_weather\", \"description\": \"Current weather for a city.\","
                + " \"input_schema\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
                + " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]},"
                + " \"cache_control\": {\"type\": \"ephemeral\"}}");
    }

    /** A first request as Claude Code sends it, with the fields it always adds. */
    static ObjectNode claudeCodeBody(String question) throws Exception {
        ObjectNode b = JSON.createObjectNode();
        b.put("model", "spindle-chat-target").put("max_tokens", 32000).put("stream", false).put("temperature", 1);
        ArrayNode system = b.putArray("system");
        system.addObject().put("type", "text").put("text", "You are a helpful assistant.").putObject("cache_control").put("type", "ephemeral");
        ArrayNode messages = b.putArray("messages");
        ObjectNode user = messages.addObject().put("role", "user");
        user.putArray("content").addObject().put("type", "text").put("text", question).putObject("cache_control").put("type", "ephemeral");
        messages.addObject().put("role", "system").put("content", "Working directory: /tmp/project");
        b.putArray("tools").add(weatherTool());
        b.putObject("thinking").put("type", "adaptive");
        b.putObject("output_config").put("effort", "high");
        b.putObject("context_management").putArray("edits").addObject().put("type", "clear_thinking_20251015").put("keep", "all");
        b.putObject("metadata").put("user_id", "user_abc_account__session_123");
        return b;
    }

    @Test
    void claudeCodesFirstRequestIsServed() throws Exception {
        Response r = http().body(claudeCodeBody("What is 47 + 38?").toString()).post("/v1/messages");
        assertEquals(200, r.statusCode(), r.asString());
        JsonNode m = JSON.readTree(r.asString());
        assertEquals("message", m.path("type").asText());
        assertTrue(m.path("content").isArray() && !m.path("content").isEmpty(), r.asString());
        assertTrue(m.path("context_management").path("applied_edits").isArray(), "the edits asked for are reported: " + r.asString());
        assertEquals(0, m.path("context_management").path("applied_edits").size(), "keep: all clears nothing");

        ObjectNode streamed = claudeCodeBody("What is 47 + 38?");
        streamed.put("stream", true);
        String sse = http().body(streamed.toString()).post("/v1/messages").then().statusCode(200).extract().asString();
        assertTrue(sse.contains("event: message_stop"), sse);
        assertTrue(sse.contains("\"context_management\":{\"applied_edits\":[]}"), "message_delta carries the report: " + sse);
    }

    @Test
    void aSystemMessageAfterTheFirstTurnIsMergedIntoTheSystemPrompt() throws Exception {
        ObjectNode body = claudeCodeBody("What is 2 + 2?");
        body.remove("context_management");
        String withMerge = http().body(body.toString()).post("/v1/messages/count_tokens").then().statusCode(200).extract().asString();
        // the same conversation with the environment block written into the system prompt renders the same prompt
        ObjectNode merged = claudeCodeBody("What is 2 + 2?");
        merged.remove("context_management");
        ((ArrayNode) merged.get("messages")).remove(1);
        ((ArrayNode) merged.get("system")).addObject().put("type", "text").put("text", "Working directory: /tmp/project");
        String direct = http().body(merged.toString()).post("/v1/messages/count_tokens").then().statusCode(200).extract().asString();
        assertEquals(JSON.readTree(direct).path("input_tokens").asInt(), JSON.readTree(withMerge).path("input_tokens").asInt());
    }

    /** A conversation of three weather lookups, each with its result and thinking, ending on a user turn. */
    static ObjectNode threeLookups() throws Exception {
        ObjectNode b = JSON.createObjectNode().put("max_tokens", 64);
        b.putArray("tools").add(weatherTool());
        ArrayNode messages = b.putArray("messages");
        messages.addObject().put("role", "user").put("content", "Weather in Madrid, Paris and Oslo?");
        String[] cities = {"Madrid", "Paris", "Oslo"};
        for (int i = 0; i < cities.length; i++) {
            ArrayNode a = messages.addObject().put("role", "assistant").putArray("content");
            a.addObject().put("type", "thinking").put("thinking", "I should look up " + cities[i] + " with the weather tool now.").put("signature", "x");
            ObjectNode use = a.addObject().put("type", "tool_use").put("id", "toolu_" + i).put("name", "get_weather");
            use.putObject("input").put("city", cities[i]);
            ArrayNode u = messages.addObject().put("role", "user").putArray("content");
            u.addObject().put("type", "tool_result").put("tool_use_id", "toolu_" + i)
                    .put("content", "{\"city\": \"" + cities[i] + "\", \"temperature\": " + (20 + i) + ", \"condition\": \"sunny with a light breeze from the west\"}");
        }
        return b;
    }

    @Test
    void contextEditingClearsOldToolResultsAndThinkingAndReportsIt() throws Exception {
        ObjectNode body = threeLookups();
        ArrayNode edits = body.putObject("context_management").putArray("edits");
        edits.addObject().put("type", "clear_thinking_20251015").putObject("keep").put("type", "thinking_turns").put("value", 1);
        ObjectNode tools = edits.addObject().put("type", "clear_tool_uses_20250919");
        tools.putObject("trigger").put("type", "tool_uses").put("value", 2);
        tools.putObject("keep").put("type", "tool_uses").put("value", 1);

        ObjectNode plain = threeLookups();
        int before = JSON.readTree(http().body(plain.toString()).post("/v1/messages/count_tokens").asString()).path("input_tokens").asInt();
        JsonNode counted = JSON.readTree(http().body(body.toString()).post("/v1/messages/count_tokens").then().statusCode(200).extract().asString());
        assertEquals(before, counted.path("context_management").path("original_input_tokens").asInt());
        assertTrue(counted.path("input_tokens").asInt() < before, "the edits shorten the prompt: " + counted);

        JsonNode m = JSON.readTree(http().body(body.toString()).post("/v1/messages").then().statusCode(200).extract().asString());
        JsonNode applied = m.path("context_management").path("applied_edits");
        assertEquals(2, applied.size(), m.toString());
        assertEquals("clear_thinking_20251015", applied.get(0).path("type").asText());
        assertEquals(2, applied.get(0).path("cleared_thinking_turns").asInt());
        assertEquals("clear_tool_uses_20250919", applied.get(1).path("type").asText());
        assertEquals(2, applied.get(1).path("cleared_tool_uses").asInt());
        int cleared = applied.get(0).path("cleared_input_tokens").asInt() + applied.get(1).path("cleared_input_tokens").asInt();
        assertTrue(applied.get(0).path("cleared_input_tokens").asInt() > 0 && applied.get(1).path("cleared_input_tokens").asInt() > 0, applied.toString());
        assertEquals(before - counted.path("input_tokens").asInt(), cleared, "the cleared tokens add up to the difference");
        assertEquals(counted.path("input_tokens").asInt(), m.path("usage").path("input_tokens").asInt() + m.path("usage").path("cache_read_input_tokens").asInt());

        // below the trigger nothing is cleared, and clear_at_least past what an edit can clear leaves it unapplied
        tools.with("trigger").put("value", 4);
        JsonNode none = JSON.readTree(http().body(body.toString()).post("/v1/messages").then().statusCode(200).extract().asString());
        assertEquals(1, none.path("context_management").path("applied_edits").size(), none.toString());
        tools.with("trigger").put("value", 1);
        tools.putObject("clear_at_least").put("type", "input_tokens").put("value", 100000);
        JsonNode tooLittle = JSON.readTree(http().body(body.toString()).post("/v1/messages").then().statusCode(200).extract().asString());
        assertEquals(1, tooLittle.path("context_management").path("applied_edits").size(), tooLittle.toString());
    }

    @Test
    void badContextEditsAndOutputConfigAreNamed() throws Exception {
        ObjectNode body = threeLookups();
        body.putObject("context_management").putArray("edits").addObject().put("type", "clear_everything");
        Response r = http().body(body.toString()).post("/v1/messages");
        assertEquals(400, r.statusCode());
        assertTrue(r.asString().contains("context_management.edits.0.type"), r.asString());
        body = threeLookups();
        body.putObject("context_management").putArray("edits").addObject().put("type", "clear_tool_uses_20250919").putObject("keep").put("type", "tool_uses").put("value", "three");
        r = http().body(body.toString()).post("/v1/messages");
        assertEquals(400, r.statusCode());
        assertTrue(r.asString().contains("context_management.edits.0.keep.value"), r.asString());
        body = threeLookups();
        body.putObject("output_config").put("effort", "extreme");
        r = http().body(body.toString()).post("/v1/messages");
        assertEquals(400, r.statusCode());
        assertTrue(r.asString().contains("output_config.effort"), r.asString());
        assertEquals("error", JSON.readTree(r.asString()).path("type").asText(), "Anthropic's error shape");
    }

    @Test
    void outputConfigFormatIsEnforcedStructuredOutput() throws Exception {
        ObjectNode body = JSON.createObjectNode().put("max_tokens", 200).put("temperature", 0);
        body.putArray("messages").addObject().put("role", "user").put("content", "What is 47 + 38? Answer in JSON.");
        ObjectNode format = body.putObject("output_config").putObject("format").put("type", "json_schema");
        format.set("schema", JSON.readTree("{\"type\": \"object\", \"properties\": {\"answer\": {\"type\": \"integer\"}}, \"required\": [\"answer\"],"
                + " \"additionalProperties\": false}"));
        JsonNode m = JSON.readTree(http().body(body.toString()).post("/v1/messages").then().statusCode(200).extract().asString());
        String text = "";
        for (JsonNode block : m.path("content")) {
            if (block.path("type").asText().equals("text")) {
                text += block.path("text").asText();
            }
        }
        JsonNode reply = JSON.readTree(text);
        assertTrue(reply.path("answer").isIntegralNumber(), text);
        assertFalse(reply.has("other"));
    }

    @Test
    void messageThreadsHoldTheConversationBetweenTurns() throws Exception {
        ObjectNode first = JSON.createObjectNode().put("max_tokens", 200).put("temperature", 0);
        first.putArray("system").addObject().put("type", "text").put("text", "You are a helpful assistant.");
        first.putArray("messages").addObject().put("role", "user").put("content", "What is 58 + 27?");
        first.putObject("thread").put("type", "create");
        JsonNode r1 = JSON.readTree(http().body(first.toString()).post("/v1/messages").then().statusCode(200).extract().asString());

        ObjectNode next = JSON.createObjectNode().put("max_tokens", 200).put("temperature", 0);
        next.putArray("messages").addObject().put("role", "user").put("content", "And 85 + 15?");
        next.putObject("thread").put("type", "continue").put("previous_message_id", r1.get("id").asText());
        JsonNode r2 = JSON.readTree(http().body(next.toString()).post("/v1/messages").then().statusCode(200).extract().asString());
        // the same turn sent whole, without a thread: the same prompt
        ObjectNode whole = JSON.createObjectNode().put("max_tokens", 200).put("temperature", 0);
        whole.set("system", first.get("system"));
        ArrayNode all = whole.putArray("messages");
        all.add(first.get("messages").get(0));
        all.addObject().put("role", "assistant").set("content", r1.get("content"));
        all.add(next.get("messages").get(0));
        JsonNode counted = JSON.readTree(http().body(whole.toString()).post("/v1/messages/count_tokens").then().statusCode(200).extract().asString());
        assertEquals(counted.get("input_tokens").asInt(), r2.path("usage").path("input_tokens").asInt() + r2.path("usage").path("cache_read_input_tokens").asInt(),
                "a continued thread renders the kept conversation, then the new turn");

        next.with("thread").put("previous_message_id", "msg_unknown");
        Response lost = http().body(next.toString()).post("/v1/messages");
        assertEquals(404, lost.statusCode());
        assertEquals("thread_not_found", JSON.readTree(lost.asString()).path("error").path("details").path("error_code").asText(), lost.asString());
    }
}

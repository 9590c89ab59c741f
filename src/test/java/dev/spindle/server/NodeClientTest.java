package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * JavaScript clients against the real server (src/test/node): the official npm {@code openai}
 * client (v6) streams (it sends Accept: application/json while streaming, the case a plain SSE
 * endpoint answers with 406), and each client's own agent helper runs a whole tool-using turn
 * (npm openai's runTools, the Vercel AI SDK's multi-step generateText, LangChain JS with
 * ToolMessages). .ci/run installs the packages (npm ci); elsewhere the tests are skipped with
 * the reason when node or a package is missing.
 */
@QuarkusTest
class NodeClientTest {
    static final Path DIR = Path.of("src/test/node");

    @TestHTTPResource("/v1")
    URL v1;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    /** Runs a script of src/test/node; its last output line is JSON. */
    JsonNode node(String module, String script, String question) throws Exception {
        String[] words = script.split(" "); // a script and its flags
        java.util.List<String> args = new java.util.ArrayList<>(java.util.List.of(v1.toString(), question));
        args.addAll(java.util.Arrays.asList(words).subList(1, words.length));
        return run(module, words[0], args.toArray(String[]::new));
    }

    JsonNode run(String module, String script, String... args) throws Exception {
        assumeTrue(Files.isDirectory(DIR.resolve("node_modules/" + module)), "npm package " + module + " not installed: run `npm ci --prefix src/test/node` (.ci/run does)");
        Process p;
        try {
            java.util.List<String> command = new java.util.ArrayList<>(java.util.List.of("node", script));
            command.addAll(java.util.List.of(args));
            p = new ProcessBuilder(command).directory(DIR.toFile()).redirectErrorStream(true).start();
        } catch (java.io.IOException e) {
            assumeTrue(false, "node is not on the PATH: " + e.getMessage());
            return null;
        }
        assertTrue(p.waitFor(180, TimeUnit.SECONDS), script + " finished");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertEquals(0, p.exitValue(), out);
        return new ObjectMapper().readTree(out.substring(out.lastIndexOf('\n') + 1));
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource({"openai, agent-openai.mjs", "ai, agent-vercel.mjs", "@langchain/openai, agent-langchain.mjs",
            "@openai/agents, agents-sdk.mjs", "openai, agent-openai.mjs --stream", "@anthropic-ai/sdk, anthropic-runner.mjs"})
    void agentHelperCompletesAToolTurn(String module, String script) throws Exception {
        JsonNode r = node(module, script, "What's the weather in Madrid?");
        System.out.println("[agent " + script + "] " + r);
        assertEquals(1, r.get("calls").size(), r.toString());
        assertEquals("get_weather", r.get("calls").get(0).get("name").asText(), r.toString());
        assertEquals("Madrid", r.get("calls").get(0).get("arguments").get("city").asText(), r.toString());
        assertTrue(r.get("answer").asText().contains("21"), "the answer uses the tool's result: " + r);
        assertEquals(2, r.get("steps").asInt(), "one call, one answer: " + r);
    }

    @Test
    void npmClientStreamsAnAnswer() throws Exception {
        JsonNode r = node("openai", "stream.mjs", "What is 58 + 27?");
        System.out.println("[npm openai] " + r);
        assertTrue(r.get("content").asText().contains("85"), r.toString());
        assertTrue(r.get("reasoning").asText().contains("carry"), r.toString());
        assertEquals("stop", r.get("finish").asText());
        assertTrue(r.get("chunks").asInt() > 5);
        assertTrue(r.path("usage").path("completion_tokens").asInt() > 5);
    }

    /**
     * npm openai's Responses API (responses.mjs): plain and streamed replies (typed events numbered from 0,
     * item ids that match the final object), a function-tool round trip streamed (argument deltas that add up
     * to the call's arguments) and sent back with function_call_output, the same through previous_response_id
     * and retrieve, text.format json_schema sampled at T 0.6, and a hosted tool left out with a warning.
     */
    @Test
    void npmClientSpeaksTheResponsesApi() throws Exception {
        JsonNode r = run("openai", "responses.mjs", v1.toString());
        System.out.println("[npm openai responses] " + r);
        JsonNode plain = r.get("plain");
        assertTrue(plain.get("text").asText().contains("85"), r.toString());
        assertEquals("[\"reasoning\",\"message\"]", plain.get("types").toString());
        assertTrue(plain.get("reasoning").asText().contains("carry"), r.toString());
        assertEquals("completed", plain.get("status").asText());
        assertTrue(plain.path("usage").path("output_tokens_details").path("reasoning_tokens").asInt() > 5, r.toString());
        JsonNode stream = r.get("stream");
        assertEquals("response.created", stream.get("first").asText());
        assertEquals("response.completed", stream.get("last").asText());
        assertTrue(stream.get("sequential").asBoolean() && stream.get("idsMatch").asBoolean(), r.toString());
        assertEquals(stream.get("text").asText(), stream.get("deltas").asText());
        for (String t : java.util.List.of("response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                "response.reasoning_text.delta", "response.output_item.done")) {
            assertTrue(stream.get("types").toString().contains("\"" + t + "\""), t + " in " + stream.get("types"));
        }
        JsonNode tools = r.get("tools");
        assertEquals("get_weather", tools.path("call").path("name").asText(), r.toString());
        assertEquals("Madrid", tools.path("call").path("arguments").path("city").asText(), r.toString());
        assertEquals(tools.get("arguments").asText(), tools.get("argDeltas").asText(), "the argument deltas add up to the arguments");
        assertTrue(tools.get("answer").asText().contains("21"), r.toString());
        assertTrue(r.path("previous").path("answer").asText().contains("21") && r.path("previous").path("fetched").asBoolean(), r.toString());
        r.get("json").forEach(ok -> assertTrue(ok.asBoolean(), "every sampled json_schema reply parses and fits: " + r.get("json")));
        assertEquals("completed", r.path("hosted").path("status").asText());
        assertTrue(r.path("hosted").path("warnings").toString().contains("web_search"), r.toString());
    }

    /**
     * npm openai as Codex uses the Responses API (responses-codex.mjs): {@code responses.compact} returns a
     * compaction item that a follow-up request sends back as input; over the WebSocket transport
     * ({@code ResponsesWS}) a reply streams as numbered events, a follow-up names the first response with
     * store off and its prompt holds the first exchange, a bad frame is answered by an error event naming
     * the field, the connection serves on, and {@code generate: false} warms up without output.
     */
    @Test
    void npmClientCompactsAndSpeaksOverAWebSocket() throws Exception {
        JsonNode r = run("openai", "responses-codex.mjs", v1.toString());
        System.out.println("[npm openai compact + websocket] " + r);
        JsonNode compact = r.get("compact");
        assertEquals("response.compaction", compact.get("object").asText(), r.toString());
        assertEquals("[\"message\",\"message\",\"compaction\"]", compact.get("types").toString(), "the user messages, then the compaction item");
        assertTrue(compact.get("blob").asBoolean() && compact.path("usage").path("output_tokens").asInt() > 0, r.toString());
        assertEquals("completed", compact.path("next").path("status").asText(), r.toString());
        assertFalse(compact.path("next").path("text").asText().isBlank(), "the toy model answers after a summary (not always rightly): " + r);
        JsonNode ws = r.get("ws");
        assertEquals("response.completed", ws.path("first").path("last").asText(), r.toString());
        assertTrue(ws.path("first").path("sequential").asBoolean(), r.toString());
        assertTrue(ws.path("first").path("text").asText().contains("85"), r.toString());
        assertEquals("response.completed", ws.path("follow").path("last").asText(), r.toString());
        assertTrue(ws.path("follow").path("input").asInt() > ws.path("follow").path("firstInput").asInt(), "the follow-up's prompt holds the first exchange: " + r);
        assertFalse(ws.path("follow").path("text").asText().isBlank(), r.toString());
        assertEquals("error", ws.path("bad").path("type").asText(), r.toString());
        assertEquals(400, ws.path("bad").path("status").asInt(), r.toString());
        assertEquals("temperature", ws.path("bad").path("param").asText(), r.toString());
        assertEquals("response.completed", ws.path("after").path("last").asText(), "the connection serves on after an error: " + r);
        assertEquals("[\"response.created\",\"response.completed\"]", ws.path("warm").path("types").toString(), r.toString());
        assertEquals(0, ws.path("warm").path("output").asInt(), r.toString());
    }

    /**
     * The Anthropic TypeScript SDK (anthropic.mjs) on /v1/messages: thinking on (the template's default) and off,
     * a streamed reply, a tool_use / tool_result round trip whose input streams as input_json_delta, count_tokens
     * equal to the prompt a reply reports, and an error in Anthropic's shape.
     */
    @Test
    void anthropicSdkSpeaksTheMessagesApi() throws Exception {
        JsonNode r = run("@anthropic-ai/sdk", "anthropic.mjs", v1.toString().replaceAll("/v1/?$", ""));
        System.out.println("[anthropic sdk] " + r);
        assertTrue(r.path("plain").path("text").asText().contains("85"), r.toString());
        assertEquals("[\"thinking\",\"text\"]", r.path("plain").path("types").toString());
        assertTrue(r.path("plain").path("thinking").asText().contains("carry"), r.toString());
        assertEquals("end_turn", r.path("plain").path("stop").asText());
        assertEquals("[\"text\"]", r.path("off").path("types").toString(), "thinking disabled: no thinking block");
        JsonNode stream = r.get("stream");
        assertEquals("message_start", stream.get("first").asText());
        assertEquals("message_stop", stream.get("last").asText());
        assertEquals(stream.get("final").asText(), stream.get("text").asText());
        for (String t : java.util.List.of("content_block_start", "content_block_delta", "content_block_stop", "message_delta")) {
            assertTrue(stream.get("events").toString().contains(t), t + " in " + stream.get("events"));
        }
        JsonNode tools = r.get("tools");
        assertEquals("tool_use", tools.path("stop").asText(), r.toString());
        assertEquals("get_weather", tools.path("name").asText(), r.toString());
        assertEquals("Madrid", tools.path("input").path("city").asText(), r.toString());
        assertEquals(tools.get("input"), new ObjectMapper().readTree(tools.get("partial").asText()), "input_json_delta adds up to the input");
        assertTrue(tools.path("answer").asText().contains("21"), r.toString());
        assertEquals("end_turn", tools.path("answerStop").asText());
        assertEquals(r.path("count").path("usage").asInt(), r.path("count").path("tokens").asInt(), r.toString());
        assertEquals(400, r.path("error").path("status").asInt(), r.toString());
        assertEquals("invalid_request_error", r.path("error").path("errorType").asText(), r.toString());
    }
}

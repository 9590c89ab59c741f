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
        assumeTrue(Files.isDirectory(DIR.resolve("node_modules/" + module)), "npm package " + module + " not installed: run `npm ci --prefix src/test/node` (.ci/run does)");
        Process p;
        try {
            p = new ProcessBuilder("node", script, v1.toString(), question).directory(DIR.toFile()).redirectErrorStream(true).start();
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
    @org.junit.jupiter.params.provider.CsvSource({"openai, agent-openai.mjs", "ai, agent-vercel.mjs", "@langchain/openai, agent-langchain.mjs"})
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
}

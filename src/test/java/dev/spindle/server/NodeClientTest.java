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
 * The official npm {@code openai} client (v6, src/test/node) streams from the real server.
 * It sends Accept: application/json while streaming, the case a plain SSE endpoint
 * answers with 406. .ci/run installs the client (npm ci); elsewhere the test is skipped
 * with the reason when node or the package is missing.
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

    @Test
    void npmClientStreamsAnAnswer() throws Exception {
        assumeTrue(Files.isDirectory(DIR.resolve("node_modules/openai")), "npm openai client not installed: run `npm ci --prefix src/test/node` (.ci/run does)");
        Process p;
        try {
            p = new ProcessBuilder("node", "stream.mjs", v1.toString(), "What is 58 + 27?").directory(DIR.toFile()).redirectErrorStream(true).start();
        } catch (java.io.IOException e) {
            assumeTrue(false, "node is not on the PATH: " + e.getMessage());
            return;
        }
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "node client finished");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertEquals(0, p.exitValue(), out);
        JsonNode r = new ObjectMapper().readTree(out.substring(out.lastIndexOf('\n') + 1));
        System.out.println("[npm openai] " + r);
        assertTrue(r.get("content").asText().contains("85"), out);
        assertTrue(r.get("reasoning").asText().contains("carry"), out);
        assertEquals("stop", r.get("finish").asText());
        assertTrue(r.get("chunks").asInt() > 5);
        assertTrue(r.path("usage").path("completion_tokens").asInt() > 5);
    }
}

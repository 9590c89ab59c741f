package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.File;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The real agent CLIs from npm ({@code src/test/agent-cli}: Claude Code and Codex, at the versions its
 * package.json pins) run headless against the server. Their first request carries every field they
 * send (Claude Code: system messages inside {@code messages}, {@code context_management},
 * {@code thinking: adaptive}, {@code output_config}, 24 tools with {@code $schema}; Codex: developer items,
 * a {@code namespace} tool, {@code client_metadata}, {@code include}, hosted tools) and must pass every
 * check of the API. What stops it is the one limit that is the model's: the prompts are 19K (Codex)
 * and 40K (Claude Code) tokens of the bundled model's 4,096-token vocabulary, past its 2,048-token
 * context, so each CLI must report exactly that refusal and no other. A whole turn (a tool call, its
 * result, the answer) needs a chat model whose context holds these prompts: not bundled yet.
 */
@QuarkusTest
class AgentCliTest {
    static final Path DIR = Path.of("src/test/agent-cli");
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/v1")
    URL v1;

    @BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    /** Runs a CLI in a fresh home and working directory; its output (stdout, then stderr). */
    static String run(List<String> command, Map<String, String> env) throws Exception {
        Path home = Files.createTempDirectory("spindle-cli-home");
        Path work = Files.createTempDirectory("spindle-cli-work");
        ProcessBuilder pb = new ProcessBuilder(command).directory(work.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.environment().put("HOME", home.toString());
        pb.environment().putAll(env);
        Process p;
        try {
            p = pb.start();
        } catch (java.io.IOException e) {
            assumeTrue(false, command.getFirst() + " could not start: " + e.getMessage());
            return null;
        }
        byte[] out = p.getInputStream().readAllBytes();
        byte[] err = p.getErrorStream().readAllBytes();
        assertTrue(p.waitFor(180, TimeUnit.SECONDS), command + " finished");
        return new String(out, StandardCharsets.UTF_8) + "\n" + new String(err, StandardCharsets.UTF_8);
    }

    static void requireInstalled(String pkg) {
        assumeTrue(Files.isDirectory(DIR.resolve("node_modules/" + pkg)),
                "npm package " + pkg + " not installed: ./run-tests installs it (npm ci --prefix src/test/agent-cli) where npm is present");
    }

    /** The refusal a CLI reports must be the context's, with the prompt's size; no field may be refused. */
    static int promptTokens(String output) {
        var m = java.util.regex.Pattern.compile("the prompt has (\\d+) tokens; the model's context is 2048").matcher(output);
        assertTrue(m.find(), "the only refusal is the context's, no protocol error: " + output);
        return Integer.parseInt(m.group(1));
    }

    @Test
    void claudeCodesFirstRequestPassesEveryCheck() throws Exception {
        requireInstalled("@anthropic-ai/claude-code");
        String root = v1.toString().replaceAll("/v1/?$", "");
        List<String> command = new ArrayList<>(List.of("node", DIR.resolve("node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs").toAbsolutePath().toString(),
                "-p", "What is 2 + 3?", "--output-format", "json"));
        String out = run(command, Map.of("ANTHROPIC_BASE_URL", root, "ANTHROPIC_API_KEY", "unused", "ANTHROPIC_MODEL", "spindle-chat-target",
                "ANTHROPIC_SMALL_FAST_MODEL", "spindle-chat-target", "DISABLE_TELEMETRY", "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"));
        System.out.println("[claude code] " + out.strip());
        JsonNode result = JSON.readTree(out.substring(out.indexOf('{'), out.lastIndexOf('}') + 1));
        assertEquals(400, result.path("api_error_status").asInt(), out);
        assertTrue(promptTokens(result.path("result").asText()) > 20_000, out);
    }

    @Test
    void codexsFirstRequestPassesEveryCheck() throws Exception {
        requireInstalled("@openai/codex");
        List<String> command = List.of(DIR.resolve("node_modules/.bin/codex").toAbsolutePath().toString(), "exec", "--skip-git-repo-check",
                "-c", "model_provider=\"spindle\"", "-c", "model_providers.spindle.name=\"spindle\"",
                "-c", "model_providers.spindle.base_url=\"" + v1 + "\"", "-c", "model_providers.spindle.wire_api=\"responses\"",
                "-c", "model_providers.spindle.env_key=\"OPENAI_API_KEY\"", "-c", "model_providers.spindle.request_max_retries=0",
                "-c", "model_providers.spindle.stream_max_retries=0", "-c", "model=\"spindle-chat-target\"", "What is 2 + 3?");
        Path codexHome = Files.createTempDirectory("spindle-codex-home");
        String out = run(command, Map.of("OPENAI_API_KEY", "unused", "CODEX_HOME", codexHome.toString()));
        System.out.println("[codex] " + out.strip());
        assertTrue(out.contains("provider: spindle"), out);
        assertTrue(promptTokens(out) > 10_000, out);
        assertTrue(out.contains("\"param\":\"input\""), "the refusal names the Responses API's own field: " + out);
    }
}

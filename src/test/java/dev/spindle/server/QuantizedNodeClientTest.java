package dev.spindle.server;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;

import java.util.Map;

/**
 * The JavaScript clients' tests of {@link NodeClientTest} (the npm openai client streaming and over the Responses API and a
 * WebSocket, the Anthropic SDK, three agent helpers running whole tool turns) against a server started with
 * {@code --quantization fp8 --kv-cache-dtype fp8}: lossy weights and a lossy KV cache change no client's experience.
 */
@QuarkusTest
@TestProfile(QuantizedNodeClientTest.Fp8WeightsAndKv.class)
class QuantizedNodeClientTest extends NodeClientTest {
    public static class Fp8WeightsAndKv implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.quantization", "fp8", "spindle.kv-cache-dtype", "fp8", "spindle.backend", "cpu");
        }
    }
}

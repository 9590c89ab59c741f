package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link QuantizedServerTest}'s agent turn and burst of seeded sampled requests (temperatures 0.6 and 1.0, each reply in the
 * burst the one it got alone) against a server serving an EXL3 checkpoint of the bundled model
 * (src/test/resources/fixtures/exl3/chat-target-4bit); /v1/models names the format served.
 */
@QuarkusTest
@TestProfile(Exl3ServerTest.Exl3Checkpoint.class)
class Exl3ServerTest extends QuantizedServerTest {
    public static class Exl3Checkpoint implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.model", "src/test/resources/fixtures/exl3/chat-target-4bit", "spindle.backend", "cpu",
                    "spindle.served-model-name", "spindle-chat-target");
        }
    }

    @Override
    @Test
    void modelsDiscloseTheFormatAndItsKl() throws Exception {
        JsonNode m = JSON.readTree(RestAssured.given().baseUri(root.toString()).get("/v1/models").asString()).path("data").path(0).path("spindle");
        assertTrue(m.path("weights").asText().startsWith("exl3 (4 bits a weight, mul1 trellis"), m.toString());
        // a published quantization served as it is: no quantization at load, nothing of Spindle's own to disclose
        assertEquals("none", m.path("quantization").asText(), m.toString());
        assertEquals("bf16", m.path("kv_cache").asText(), m.toString());
    }
}

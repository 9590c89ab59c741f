package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.model.QuantizedTestFiles;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link QuantizedServerTest}'s agent turn and burst of seeded sampled requests (temperatures 0.6 and 1.0, each reply in the
 * burst the one it got alone) against a server serving an NVFP4 checkpoint of the bundled model in compressed-tensors'
 * layout (written at test time by {@link QuantizedTestFiles#nvfp4}; the head bf16, as llm-compressor's recipe leaves it);
 * /v1/models names the format served.
 */
@QuarkusTest
@TestProfile(Nvfp4ServerTest.Nvfp4Checkpoint.class)
class Nvfp4ServerTest extends QuantizedServerTest {
    public static class Nvfp4Checkpoint implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            Path dir = QuantizedTestFiles.nvfp4(Path.of("models/spindle-chat-target"), Path.of("target/nvfp4/spindle-chat-target-ct"));
            return Map.of("spindle.model", dir.toString(), "spindle.backend", "cpu", "spindle.served-model-name", "spindle-chat-target");
        }
    }

    @Override
    @Test
    void modelsDiscloseTheFormatAndItsKl() throws Exception {
        JsonNode m = JSON.readTree(RestAssured.given().baseUri(root.toString()).get("/v1/models").asString()).path("data").path(0).path("spindle");
        assertTrue(m.path("weights").asText().startsWith("nvfp4 (e2m1, an e4m3 scale a group of 16, a tensor scale)"), m.toString());
        assertEquals("none", m.path("quantization").asText(), m.toString());
    }
}

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
 * burst the one it got alone) against a server serving an MLX affine 8-bit checkpoint of the bundled model (written at test
 * time by {@link QuantizedTestFiles#mlxAffine}: groups of 32, its head too); /v1/models names the format served. 8 bits, not
 * 4: at 4 bits this 13M-parameter model moves far enough from its release (KL 0.099, docs/KL.md) that the seeded agent turn
 * answers without calling the tool; the 4-bit path runs the same code (the KL and forward-pass tests cover it).
 */
@QuarkusTest
@TestProfile(MlxServerTest.MlxCheckpoint.class)
class MlxServerTest extends QuantizedServerTest {
    public static class MlxCheckpoint implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            Path dir = QuantizedTestFiles.mlxAffine(Path.of("models/spindle-chat-target"), 8, 32, Path.of("target/mlx/spindle-chat-target-8bit"));
            return Map.of("spindle.model", dir.toString(), "spindle.backend", "cpu", "spindle.served-model-name", "spindle-chat-target");
        }
    }

    @Override
    @Test
    void modelsDiscloseTheFormatAndItsKl() throws Exception {
        JsonNode m = JSON.readTree(RestAssured.given().baseUri(root.toString()).get("/v1/models").asString()).path("data").path(0).path("spindle");
        assertTrue(m.path("weights").asText().startsWith("mlx affine 8-bit (groups of 32)"), m.toString());
        assertEquals("none", m.path("quantization").asText(), m.toString());
    }
}

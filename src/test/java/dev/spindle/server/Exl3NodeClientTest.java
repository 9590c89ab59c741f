package dev.spindle.server;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;

import java.util.Map;

/**
 * The JavaScript clients' tests of {@link NodeClientTest} (the npm openai client streaming, the Responses API and a
 * WebSocket, the Anthropic SDK, the agent helpers' tool turns) against a server started on an EXL3 checkpoint: the bundled
 * model at 4 bits a weight with a 6-bit head (src/test/resources/fixtures/exl3/chat-target-4bit, its README says how it was
 * made), served as exllamav3's format stores it.
 */
@QuarkusTest
@TestProfile(Exl3NodeClientTest.Exl3Checkpoint.class)
class Exl3NodeClientTest extends NodeClientTest {
    public static class Exl3Checkpoint implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // the clients ask for the bundled model by its directory's name
            return Map.of("spindle.model", "src/test/resources/fixtures/exl3/chat-target-4bit", "spindle.backend", "cpu",
                    "spindle.served-model-name", "spindle-chat-target");
        }
    }
}

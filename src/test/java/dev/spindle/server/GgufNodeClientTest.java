package dev.spindle.server;

import dev.spindle.model.gguf.GgufTestFiles;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;

import java.nio.file.Path;
import java.util.Map;

/**
 * The JavaScript clients' tests of {@link NodeClientTest} (the npm openai client streaming, the Responses API and a
 * WebSocket, the Anthropic SDK, six agent helpers' tool turns) against a server started with {@code --model FILE.gguf}:
 * the bundled model as one GGUF file (its bf16 weights in llama.cpp's layout, its vocabulary and chat template in the
 * file's metadata: tokenized as llama.cpp tokenizes it), nothing else beside it.
 */
@QuarkusTest
@TestProfile(GgufNodeClientTest.GgufFile.class)
class GgufNodeClientTest extends NodeClientTest {
    public static class GgufFile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            Path file = GgufTestFiles.bf16WithMetadata(Path.of("models/spindle-chat-target"),
                    Path.of("src/test/resources/fixtures/gguf-vocab/spindle-chat-target-vocab-prefix-false.gguf"), Path.of("target/gguf/spindle-chat-target-bf16.gguf"));
            // the clients ask for the bundled model by its directory's name
            return Map.of("spindle.model", file.toString(), "spindle.backend", "cpu", "spindle.served-model-name", "spindle-chat-target");
        }
    }
}

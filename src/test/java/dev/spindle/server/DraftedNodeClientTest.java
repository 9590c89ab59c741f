package dev.spindle.server;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;

/**
 * The npm clients of {@link NodeClientTest} (openai streaming, and the agent helpers of openai, the
 * Vercel AI SDK and LangChain JS) against a server that drafts with prompt lookup.
 */
@QuarkusTest
@TestProfile(DraftedNodeClientTest.Ngram.class)
class DraftedNodeClientTest extends NodeClientTest {
    public static class Ngram implements io.quarkus.test.junit.QuarkusTestProfile {
        @Override
        public java.util.Map<String, String> getConfigOverrides() {
            return java.util.Map.of("spindle.speculative.method", "ngram", "spindle.speculative.num-tokens", "6");
        }
    }
}

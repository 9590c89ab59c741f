package dev.spindle.server;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every agent loop of {@link AgentLoopTest} (openai-java and LangChain4j, greedy and sampled at the
 * model's temperatures) again, on a server that drafts with the bundled drafter: the same checks
 * hold, and the metrics show drafts accepted.
 */
@QuarkusTest
@TestProfile(DraftedAgentLoopTest.Drafted.class)
class DraftedAgentLoopTest extends AgentLoopTest {
    public static class Drafted implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.speculative.method", "draft", "spindle.speculative.draft-model", "models/spindle-chat-drafter",
                    "spindle.speculative.num-tokens", "4");
        }
    }

    /** A counter's value in the Prometheus text. */
    static double metric(String text, String name) {
        Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name) + "(\\{[^}]*\\})? ([0-9.eE+-]+)$").matcher(text);
        double sum = 0;
        while (m.find()) {
            sum += Double.parseDouble(m.group(2));
        }
        return sum;
    }

    static String metrics(java.net.URL any) throws Exception {
        URI uri = URI.create(any.getProtocol() + "://" + any.getHost() + ":" + any.getPort() + "/q/metrics");
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    @Test
    void theServerDraftsAndReportsItInVllmsNames() throws Exception {
        openAiJavaLoop("What's the weather in Madrid?", 0, null);
        String m = metrics(v1);
        double drafted = metric(m, "vllm:spec_decode_num_draft_tokens_total"), accepted = metric(m, "vllm:spec_decode_num_accepted_tokens_total");
        System.out.printf("[drafted server] drafted %.0f, accepted %.0f, per position %.0f%n", drafted, accepted,
                metric(m, "vllm:spec_decode_num_accepted_tokens_per_pos_total"));
        assertTrue(drafted > 0 && accepted > 0, "drafts were verified and accepted: " + drafted + ", " + accepted);
        assertTrue(accepted == metric(m, "vllm:spec_decode_num_accepted_tokens_per_pos_total"), "per-position counts add up");
        assertTrue(metric(m, "spindle_spec_accepted_length_total") == metric(m, "vllm:spec_decode_num_drafts_total"), "one length per window");
    }
}

package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A server started with --quantization fp8 on the CPU backend: /v1/models discloses the format served and the KL measured
 * for it, a whole agent turn (a tool call, its result, the answer) works at the model's recommended temperature, and a burst
 * of seeded sampled requests at 0.6 and 1.0 gives each the reply it got alone.
 */
@QuarkusTest
@TestProfile(QuantizedServerTest.Fp8.class)
class QuantizedServerTest {
    public static class Fp8 implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.quantization", "fp8", "spindle.backend", "cpu");
        }
    }

    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/")
    URL root;

    @BeforeEach
    void modelLoaded() {
        ServerReady.await(root);
    }

    @Test
    void modelsDiscloseTheFormatAndItsKl() throws Exception {
        JsonNode m = JSON.readTree(RestAssured.given().baseUri(root.toString()).get("/v1/models").asString()).path("data").path(0).path("spindle");
        assertEquals("fp8-e4m3 (128x128 block scales)", m.path("weights").asText(), m.toString());
        assertEquals("fp8-block", m.path("quantization").asText());
        assertEquals("bf16", m.path("kv_cache").asText());
        double chat = m.path("kl").path("kl_mean").path("chat").asDouble();
        assertTrue(chat > 0 && chat < 0.05, m.toString());
    }

    @Test
    void anAgentTurnRunsOnFp8Weights() throws Exception {
        ObjectNode req = JSON.createObjectNode().put("temperature", 0.6).put("seed", 7).put("max_tokens", 200);
        ArrayNode messages = req.putArray("messages");
        messages.addObject().put("role", "user").put("content", "What's the weather in Paris?");
        ObjectNode fn = req.putArray("tools").addObject().put("type", "function").putObject("function");
        fn.put("name", "get_weather").put("description", "Current weather for a city.");
        ObjectNode params = fn.putObject("parameters").put("type", "object");
        params.putObject("properties").putObject("city").put("type", "string").put("description", "City name");
        params.putArray("required").add("city");
        JsonNode first = post(req);
        JsonNode call = first.path("choices").path(0).path("message").path("tool_calls").path(0);
        assertEquals("tool_calls", first.path("choices").path(0).path("finish_reason").asText(), first.toString());
        assertEquals("get_weather", call.path("function").path("name").asText(), first.toString());
        ObjectNode assistant = messages.addObject().put("role", "assistant").put("content", "");
        assistant.putArray("tool_calls").add(call);
        messages.addObject().put("role", "tool").put("tool_call_id", call.path("id").asText())
                .put("content", "{\"city\": \"Paris\", \"temperature\": 18, \"unit\": \"°C\", \"condition\": \"cloudy\"}");
        JsonNode answer = post(req);
        String text = answer.path("choices").path(0).path("message").path("content").asText();
        assertEquals("stop", answer.path("choices").path(0).path("finish_reason").asText(), answer.toString());
        assertTrue(text.contains("18"), answer.toString());
    }

    /**
     * Seeded sampled requests at the model's recommended temperatures (0.6 and 1.0) on fp8 weights, each sent alone and then
     * all at once: every reply in the burst is the reply it got alone (a request batched equals it alone, on the lossy format).
     */
    @Test
    void aBurstOfSeededSampledRequestsEqualsEachAlone() throws Exception {
        String[] prompts = {"What is 17 + 25?", "Name three colours.", "Is 2100 a leap year?", "Give me a tip for writing tests.",
                "How many centimetres are in 2 metres?", "Say hello in French."};
        List<ObjectNode> reqs = new ArrayList<>();
        for (double t : new double[]{0.6, 1.0}) {
            for (int i = 0; i < prompts.length; i++) {
                ObjectNode req = JSON.createObjectNode().put("temperature", t).put("top_p", 0.95).put("seed", 100 + i).put("max_tokens", 40);
                req.putArray("messages").addObject().put("role", "user").put("content", prompts[i]);
                reqs.add(req);
            }
        }
        List<String> alone = new ArrayList<>();
        for (ObjectNode r : reqs) {
            alone.add(post(r).path("choices").path(0).path("message").toString());
        }
        HttpClient http = HttpClient.newHttpClient();
        List<CompletableFuture<HttpResponse<String>>> burst = new ArrayList<>();
        for (ObjectNode r : reqs) {
            burst.add(http.sendAsync(HttpRequest.newBuilder(URI.create(root + "v1/chat/completions")).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(r.toString())).build(), HttpResponse.BodyHandlers.ofString()));
        }
        for (int i = 0; i < reqs.size(); i++) {
            HttpResponse<String> resp = burst.get(i).get();
            assertEquals(200, resp.statusCode(), resp.body());
            assertEquals(alone.get(i), JSON.readTree(resp.body()).path("choices").path(0).path("message").toString(),
                    "request " + i + " (temperature " + reqs.get(i).path("temperature") + ") in a burst of " + reqs.size());
        }
        assertTrue(alone.stream().distinct().count() > reqs.size() / 2, "sampled replies differ between prompts and seeds: " + alone);
    }

    private JsonNode post(ObjectNode body) throws Exception {
        String r = RestAssured.given().baseUri(root.toString()).contentType("application/json").body(body.toString()).post("/v1/chat/completions")
                .then().statusCode(200).extract().asString();
        return JSON.readTree(r);
    }
}

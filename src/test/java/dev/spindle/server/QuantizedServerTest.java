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

import java.net.URL;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A server started with --quantization fp8 on the CPU backend: /v1/models discloses the format served and the KL measured
 * for it, and a whole agent turn (a tool call, its result, the answer) works at the model's recommended temperature.
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

    private JsonNode post(ObjectNode body) throws Exception {
        String r = RestAssured.given().baseUri(root.toString()).contentType("application/json").body(body.toString()).post("/v1/chat/completions")
                .then().statusCode(200).extract().asString();
        return JSON.readTree(r);
    }
}

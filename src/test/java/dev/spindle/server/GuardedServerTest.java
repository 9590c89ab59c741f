package dev.spindle.server;

import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import io.restassured.response.Response;
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
 * A server with an API key, a waiting queue bounded at 4 and one browser origin: 401 without
 * the key (any case of "Bearer" works), a burst of 80 requests at once is cut to what fits
 * (429 with Retry-After in OpenAI's rate-limit shape for the rest), and a CORS preflight is
 * answered without the key.
 */
@QuarkusTest
@TestProfile(GuardedServerTest.Guarded.class)
class GuardedServerTest {
    public static class Guarded implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.api-key", "s3cret", "spindle.max-waiting-requests", "4", "spindle.max-num-seqs", "2",
                    "quarkus.http.cors.origins", "http://localhost:3000");
        }
    }

    static final String BODY = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 3}";

    @TestHTTPResource("/")
    URL root;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(root);
    }

    Response post(String auth) {
        var r = RestAssured.given().baseUri(root.toString()).contentType("application/json");
        if (auth != null) {
            r = r.header("Authorization", auth);
        }
        return r.body(BODY).post("/v1/chat/completions");
    }

    @Test
    void theKeyIsRequiredInAnyCaseOfBearer() {
        assertEquals(401, post(null).statusCode());
        assertEquals(401, post("Bearer wrong").statusCode());
        assertEquals(200, post("Bearer s3cret").statusCode());
        assertEquals(200, post("bearer s3cret").statusCode(), "auth schemes are case-insensitive");
        assertEquals(200, post("BEARER  s3cret").statusCode());
        assertEquals(200, RestAssured.given().baseUri(root.toString()).get("/q/health/ready").statusCode(), "health needs no key");
    }

    /** Anthropic's clients send the key as x-api-key (with anthropic-version); a refusal comes in Anthropic's shape. */
    @Test
    void anthropicClientsAuthenticateWithXApiKey() {
        String body = "{\"max_tokens\": 3, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
        var denied = RestAssured.given().baseUri(root.toString()).contentType("application/json").header("x-api-key", "wrong")
                .header("anthropic-version", "2023-06-01").body(body).post("/v1/messages");
        assertEquals(401, denied.statusCode());
        assertEquals("authentication_error", denied.jsonPath().getString("error.type"), denied.asString());
        assertEquals("error", denied.jsonPath().getString("type"));
        var ok = RestAssured.given().baseUri(root.toString()).contentType("application/json").header("x-api-key", "s3cret")
                .header("anthropic-version", "2023-06-01").body(body).post("/v1/messages");
        assertEquals(200, ok.statusCode(), ok.asString());
        assertEquals("message", ok.jsonPath().getString("type"));
        assertEquals(200, RestAssured.given().baseUri(root.toString()).contentType("application/json").header("x-api-key", "s3cret")
                .body(BODY).post("/v1/chat/completions").statusCode(), "x-api-key works on every route");
    }

    @Test
    void aBurstIsCutAtTheWaitingBound() throws Exception {
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        HttpRequest req = HttpRequest.newBuilder(URI.create(root + "v1/chat/completions")).header("Authorization", "Bearer s3cret")
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(BODY)).build();
        List<CompletableFuture<HttpResponse<String>>> all = new ArrayList<>();
        for (int i = 0; i < 80; i++) {
            all.add(http.sendAsync(req, HttpResponse.BodyHandlers.ofString()));
        }
        int ok = 0, busy = 0;
        for (var f : all) {
            HttpResponse<String> r = f.get();
            if (r.statusCode() == 200) {
                ok++;
            } else {
                assertEquals(429, r.statusCode(), r.body());
                assertEquals("1", r.headers().firstValue("Retry-After").orElse(null));
                var e = new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()).path("error");
                assertEquals("rate_limit_exceeded", e.path("code").asText(), r.body());
                assertEquals("requests", e.path("type").asText(), r.body());
                assertTrue(e.path("message").asText().contains("busy"), r.body());
                busy++;
            }
        }
        System.out.printf("[burst] 80 at once, 2 batch slots and 4 waiting places: %d served, %d refused with 429%n", ok, busy);
        assertTrue(busy > 0, "the bound refused some of the burst");
        assertTrue(ok >= 6, "at least the free batch slots and the waiting places were served: " + ok);
        assertEquals(200, post("Bearer s3cret").statusCode(), "after the burst the server serves again");
    }

    @Test
    void aCorsPreflightIsAnsweredBeforeTheKeyCheck() {
        Response r = RestAssured.given().baseUri(root.toString()).header("Origin", "http://localhost:3000")
                .header("Access-Control-Request-Method", "POST").header("Access-Control-Request-Headers", "authorization,content-type")
                .options("/v1/chat/completions");
        assertEquals(200, r.statusCode(), r.asString());
        assertEquals("http://localhost:3000", r.header("Access-Control-Allow-Origin"));
        Response actual = RestAssured.given().baseUri(root.toString()).header("Origin", "http://localhost:3000")
                .header("Authorization", "Bearer s3cret").contentType("application/json").body(BODY).post("/v1/chat/completions");
        assertEquals(200, actual.statusCode());
        assertEquals("http://localhost:3000", actual.header("Access-Control-Allow-Origin"));
        Response other = RestAssured.given().baseUri(root.toString()).header("Origin", "http://evil.example")
                .header("Access-Control-Request-Method", "POST").options("/v1/chat/completions");
        assertTrue(other.header("Access-Control-Allow-Origin") == null, "other origins get no CORS grant");
    }
}

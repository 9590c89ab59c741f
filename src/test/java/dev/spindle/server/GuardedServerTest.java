package dev.spindle.server;

import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.RestAssured;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A server with an API key and a waiting queue bounded at zero: 401 without the key, 429 with Retry-After when full. */
@QuarkusTest
@TestProfile(GuardedServerTest.Guarded.class)
class GuardedServerTest {
    public static class Guarded implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.api-key", "s3cret", "spindle.max-waiting-requests", "0");
        }
    }

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
        return r.body("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}").post("/v1/chat/completions");
    }

    @Test
    void keyAndQueueBound() {
        assertEquals(401, post(null).statusCode());
        assertEquals(401, post("Bearer wrong").statusCode());
        Response r = post("Bearer s3cret");
        assertEquals(429, r.statusCode(), r.asString());
        assertEquals("1", r.header("Retry-After"));
        assertTrue(r.jsonPath().getString("error.message").contains("busy"));
        assertEquals(200, RestAssured.given().baseUri(root.toString()).get("/q/health/ready").statusCode(), "health needs no key");
    }
}

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

/** With spindle.management-port set, metrics and health move there and the API port serves the API alone. */
@QuarkusTest
@TestProfile(ManagementPortTest.Separate.class)
class ManagementPortTest {
    static final int PORT = 19317;

    public static class Separate implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("spindle.management-port", String.valueOf(PORT), "spindle.management-host", "127.0.0.1");
        }
    }

    @TestHTTPResource("/")
    URL root;

    @Test
    void metricsAndHealthAreOnTheManagementPortOnly() throws Exception {
        String mgmt = "http://127.0.0.1:" + PORT;
        long deadline = System.currentTimeMillis() + 120_000;
        while (RestAssured.given().baseUri(mgmt).get("/q/health/ready").statusCode() != 200) {
            assertTrue(System.currentTimeMillis() < deadline, "the model became ready");
            Thread.sleep(200);
        }
        Response metrics = RestAssured.given().baseUri(mgmt).get("/q/metrics");
        assertEquals(200, metrics.statusCode());
        assertTrue(metrics.asString().contains("spindle_requests_running"), "Prometheus text");
        assertEquals(200, RestAssured.given().baseUri(mgmt).get("/q/health/live").statusCode());
        assertTrue(RestAssured.given().baseUri(mgmt).get("/q/health").asString().contains("\"model\""));
        assertEquals(404, RestAssured.given().baseUri(root.toString()).get("/q/metrics").statusCode(), "not on the API port");
        assertEquals(404, RestAssured.given().baseUri(root.toString()).get("/q/health/ready").statusCode());
        assertEquals(200, RestAssured.given().baseUri(root.toString()).get("/v1/models").statusCode(), "the API is on the API port");
        assertEquals(404, RestAssured.given().baseUri(mgmt).get("/v1/models").statusCode(), "and only there");
    }
}

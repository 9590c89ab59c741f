package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
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
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A field of the wrong type or out of range is a 400 that names it, on every endpoint; and
 * no request at all, however malformed, gets a 5xx: a seeded fuzzer mutates valid bodies
 * (fields replaced by values of every JSON type, deleted, nested, bodies cut short) and sends
 * them in bursts.
 */
@QuarkusTest
class RequestValidationTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/")
    URL root;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(root);
    }

    Response post(String path, String body) {
        return RestAssured.given().baseUri(root.toString()).contentType("application/json").body(body).post(path);
    }

    void assertRefused(String path, String body, String param) {
        Response r = post(path, body);
        assertEquals(400, r.statusCode(), path + " " + body + " -> " + r.asString());
        assertEquals(param, r.jsonPath().getString("error.param"), path + " " + body + " -> " + r.asString());
        assertEquals("invalid_request_error", r.jsonPath().getString("error.type"));
    }

    static final String MSGS = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";

    @Test
    void wrongTypesAndRangesAreNamed() {
        assertRefused("/tokenize", "{\"messages\": \"x\"}", "messages");
        assertRefused("/tokenize", "{" + MSGS + ", \"tools\": \"x\"}", "tools");
        assertRefused("/tokenize", "{\"prompt\": 5}", "prompt");
        assertRefused("/detokenize", "{\"tokens\": [-1]}", "tokens[0]");
        assertRefused("/detokenize", "{\"tokens\": [1, 99999]}", "tokens[1]");
        assertRefused("/detokenize", "{\"tokens\": [\"a\"]}", "tokens[0]");
        String chat = "/v1/chat/completions";
        assertRefused(chat, "{" + MSGS + ", \"logit_bias\": {\"99999\": 1}}", "logit_bias");
        assertRefused(chat, "{" + MSGS + ", \"logit_bias\": {\"5\": \"up\"}}", "logit_bias");
        assertRefused(chat, "{" + MSGS + ", \"top_k\": -5}", "top_k");
        assertRefused(chat, "{" + MSGS + ", \"max_tokens\": 4.5}", "max_tokens");
        assertRefused(chat, "{" + MSGS + ", \"temperature\": \"hot\"}", "temperature");
        assertRefused(chat, "{" + MSGS + ", \"stream\": \"yes\"}", "stream");
        assertRefused(chat, "{" + MSGS + ", \"n\": 0}", "n");
        assertRefused(chat, "{" + MSGS + ", \"stop\": 5}", "stop");
        assertRefused(chat, "{" + MSGS + ", \"stop_token_ids\": [-3]}", "stop_token_ids[0]");
        assertRefused(chat, "{" + MSGS + ", \"seed\": 1.5}", "seed");
        assertRefused(chat, "{" + MSGS + ", \"presence_penalty\": 9}", "presence_penalty");
        assertRefused(chat, "{" + MSGS + ", \"response_format\": \"json\"}", "response_format");
        assertRefused(chat, "{" + MSGS + ", \"tool_choice\": 7}", "tool_choice");
        assertRefused(chat, "{" + MSGS + ", \"parallel_tool_calls\": \"no\"}", "parallel_tool_calls");
        assertRefused(chat, "{" + MSGS + ", \"tools\": [{\"type\": \"function\", \"function\": {\"description\": \"no name\"}}]}", "tools[0].function.name");
        assertRefused(chat, "{\"messages\": [5]}", "messages[0]");
        assertRefused(chat, "{\"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}", "messages[0].role");
        assertRefused(chat, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content");
        assertRefused(chat, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"no type\"}]}]}", "messages[0].content[0]");
        assertRefused("/v1/completions", "{\"prompt\": [1, -2]}", "prompt[1]");
        assertRefused("/v1/completions", "{\"prompt\": \"hi\", \"echo\": 1}", "echo");
        Response form = RestAssured.given().baseUri(root.toString()).contentType("application/x-www-form-urlencoded")
                .body("{" + MSGS + ", \"max_tokens\": 2}").post(chat);
        assertEquals(200, form.statusCode(), "a JSON body is read whatever its Content-Type says (curl -d): " + form.asString());
    }

    /** Values of every JSON type, including the edges of numbers. */
    static JsonNode randomValue(Random r, int depth) {
        JsonNodeFactory f = JsonNodeFactory.instance;
        return switch (r.nextInt(depth > 1 ? 13 : 15)) {
            case 0 -> f.nullNode();
            case 1 -> f.booleanNode(r.nextBoolean());
            case 2 -> f.numberNode(r.nextInt(7) - 3);
            case 3 -> f.numberNode(r.nextDouble() * 4 - 1);
            case 4 -> f.numberNode(List.of(-1e300, 1e300, 9.2e18, -0.0, 1e-9).get(r.nextInt(5)));
            case 5 -> f.numberNode(List.of(Long.MAX_VALUE, Long.MIN_VALUE, (long) Integer.MAX_VALUE + 1, 166912L, 4096L).get(r.nextInt(5)));
            case 6 -> f.textNode("");
            case 7 -> f.textNode(List.of("auto", "none", "required", "json_schema", "user", "assistant", "tool", "\u0000", "{", "<tool_call>", "é中")
                    .get(r.nextInt(11)));
            case 8 -> f.textNode("x".repeat(r.nextInt(40)));
            case 9, 10 -> f.arrayNode();
            case 11, 12 -> f.objectNode();
            case 13 -> {
                ArrayNode a = f.arrayNode();
                for (int i = r.nextInt(3); i >= 0; i--) {
                    a.add(randomValue(r, depth + 1));
                }
                yield a;
            }
            default -> {
                ObjectNode o = f.objectNode();
                for (String k : List.of("type", "role", "content", "name", "function", "schema", "arguments", "json_schema", "properties")) {
                    if (r.nextInt(3) == 0) {
                        o.set(k, randomValue(r, depth + 1));
                    }
                }
                yield o;
            }
        };
    }

    /** Replaces, deletes or adds one field somewhere in the tree. */
    static void mutate(JsonNode node, Random r) {
        if (node instanceof ObjectNode o && o.size() > 0) {
            List<String> keys = new ArrayList<>();
            o.fieldNames().forEachRemaining(keys::add);
            String k = keys.get(r.nextInt(keys.size()));
            JsonNode child = o.get(k);
            int what = r.nextInt(10);
            if (what < 3 && (child.isContainerNode() && child.size() > 0)) {
                mutate(child, r);
            } else if (what < 4) {
                o.remove(k);
            } else if (what < 5) {
                o.set(List.of("tool_choice", "response_format", "logit_bias", "tools", "stop", "n", "seed", "top_logprobs", "logprobs",
                        "chat_template_kwargs", "stream_options", "echo", "prompt", "messages", "tokens").get(r.nextInt(15)), randomValue(r, 0));
            } else {
                o.set(k, randomValue(r, 0));
            }
        } else if (node instanceof ArrayNode a && a.size() > 0) {
            int i = r.nextInt(a.size());
            if (a.get(i).isContainerNode() && a.get(i).size() > 0 && r.nextBoolean()) {
                mutate(a.get(i), r);
            } else {
                a.set(i, randomValue(r, 0));
            }
        }
    }

    @Test
    void fuzzedRequestsNeverGetA5xx() throws Exception {
        Map<String, String> bases = Map.of(
                "/v1/chat/completions", "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]},"
                        + " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"1\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}}]},"
                        + " {\"role\": \"tool\", \"tool_call_id\": \"1\", \"content\": \"{}\"}], \"max_tokens\": 2, \"temperature\": 0.6, \"top_p\": 0.9, \"stream\": false,"
                        + " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}],"
                        + " \"tool_choice\": \"auto\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\"}}}}",
                "/v1/completions", "{\"prompt\": \"Hello\", \"max_tokens\": 2, \"logprobs\": 2, \"echo\": false, \"stop\": [\"\\n\"], \"seed\": 3}",
                "/tokenize", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [], \"add_generation_prompt\": true}",
                "/detokenize", "{\"tokens\": [1, 2, 3]}",
                "/v1/responses", "{\"instructions\": \"be brief\", \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"hi\"}]},"
                        + " {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"get_time\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"},"
                        + " {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"{}\"}], \"max_output_tokens\": 2, \"temperature\": 0.6,"
                        + " \"tools\": [{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}],"
                        + " \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"x\", \"schema\": {\"type\": \"object\"}}}, \"stream\": false}",
                "/v1/messages", "{\"system\": \"be brief\", \"max_tokens\": 2, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"},"
                        + " {\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"get_time\", \"input\": {\"city\": \"Oslo\"}}]},"
                        + " {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": \"{}\"}]}],"
                        + " \"tools\": [{\"name\": \"get_time\", \"input_schema\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}],"
                        + " \"tool_choice\": {\"type\": \"auto\"}, \"temperature\": 0.6, \"stop_sequences\": [\"\\n\\n\"]}");
        List<String> paths = List.copyOf(new TreeMap<>(bases).keySet());
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        Random r = new Random(20261201);
        Map<Integer, Integer> statuses = new TreeMap<>();
        int sent = 0;
        for (int burst = 0; burst < 75; burst++) {
            List<CompletableFuture<HttpResponse<String>>> inFlight = new ArrayList<>();
            List<String> bodies = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                String path = paths.get(r.nextInt(paths.size()));
                JsonNode body = JSON.readTree(bases.get(path));
                for (int m = 1 + r.nextInt(3); m > 0; m--) {
                    mutate(body, r);
                }
                if (body instanceof ObjectNode o) {
                    for (String k : List.of("max_tokens", "max_completion_tokens", "max_output_tokens")) { // keep generations short: a few tokens or a refusal
                        if (o.path(k).isNumber() && o.get(k).asDouble() > 4 && o.get(k).asDouble() < 1e6) {
                            o.put(k, 3);
                        }
                    }
                    // a mutation that drops the limit leaves a reply of up to the whole context (seconds on the CPU): the limit
                    // comes back where the API has a default (Anthropic's max_tokens is required: dropping it stays a refusal)
                    if (!path.equals("/v1/messages") && !path.startsWith("/tokenize") && !path.startsWith("/detokenize")
                            && Stream.of("max_tokens", "max_completion_tokens", "max_output_tokens").noneMatch(o::has)) {
                        o.put(path.equals("/v1/responses") ? "max_output_tokens" : "max_tokens", 3);
                    }
                    if (o.path("n").isNumber() && o.get("n").asDouble() > 2 && o.get("n").asDouble() <= 16) {
                        o.put("n", 2);
                    }
                }
                String text = body.toString();
                if (r.nextInt(20) == 0) {
                    text = text.substring(0, r.nextInt(text.length())); // cut short
                }
                bodies.add(path + " " + text);
                inFlight.add(http.sendAsync(HttpRequest.newBuilder(URI.create(root + path.substring(1))).header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(text)).build(), HttpResponse.BodyHandlers.ofString()));
            }
            for (int i = 0; i < inFlight.size(); i++) {
                HttpResponse<String> resp = inFlight.get(i).get();
                statuses.merge(resp.statusCode(), 1, Integer::sum);
                sent++;
                assertTrue(resp.statusCode() < 500, bodies.get(i) + " -> " + resp.statusCode() + " " + resp.body());
                if (resp.statusCode() == 400) {
                    assertTrue(JSON.readTree(resp.body()).path("error").path("message").isTextual(), resp.body());
                }
            }
        }
        System.out.println("[fuzz] " + sent + " mutated requests, statuses " + statuses);
        assertTrue(statuses.getOrDefault(200, 0) > 20 && statuses.getOrDefault(400, 0) > 100, "both served and refused requests: " + statuses);
    }
}

package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.models.responses.EasyInputMessage;
import com.openai.models.responses.FunctionTool;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseFunctionToolCall;
import com.openai.models.responses.ResponseInputItem;
import com.openai.models.responses.ResponseOutputItem;
import com.openai.models.responses.ResponseStreamEvent;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.RestAssured;
import io.restassured.response.ValidatableResponse;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.notNullValue;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Responses and Messages APIs with openai-java and plain HTTP (the npm SDKs are in NodeClientTest):
 * a whole tool round trip through openai-java's Responses API, stored responses, bad input for both APIs
 * answered in each API's own error shape (and the server serving on), tool-call arguments streamed piece
 * by piece on chat completions, and vLLM's request extensions honoured or refused.
 */
@QuarkusTest
class AgentApisTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/v1")
    URL v1;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    RequestSpecification http() {
        return RestAssured.given().baseUri(v1.toString().replaceAll("/v1/?$", "")).contentType("application/json");
    }

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().apiKey("unused").baseUrl(v1.toString()).build();
    }

    /** The weather tool as the bundled model was trained on it (its schema's keys in the trained order: Map.of would shuffle them). */
    static FunctionTool weatherTool() {
        try {
            JsonNode params = JSON.readTree("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
                    + " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}");
            FunctionTool.Parameters.Builder b = FunctionTool.Parameters.builder();
            params.properties().forEach(e -> b.putAdditionalProperty(e.getKey(), JsonValue.fromJsonNode(e.getValue())));
            return FunctionTool.builder().name("get_weather").description("Current weather for a city.").strict(false).parameters(b.build()).build();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void openAiJavaRunsAToolRoundTripOverResponses() {
        OpenAIClient client = client();
        EasyInputMessage question = EasyInputMessage.builder().role(EasyInputMessage.Role.USER).content("What's the weather in Madrid?").build();
        ResponseCreateParams first = ResponseCreateParams.builder().model("spindle-chat-target")
                .inputOfResponse(List.of(ResponseInputItem.ofEasyInputMessage(question))).addTool(weatherTool())
                .temperature(0.0).maxOutputTokens(300L).build();
        List<String> argumentDeltas = new ArrayList<>();
        Response r1;
        try (StreamResponse<ResponseStreamEvent> stream = client.responses().createStreaming(first)) {
            Response[] completed = {null};
            stream.stream().forEach(e -> {
                if (e.isFunctionCallArgumentsDelta()) {
                    argumentDeltas.add(e.asFunctionCallArgumentsDelta().delta());
                }
                if (e.isCompleted()) {
                    completed[0] = e.asCompleted().response();
                }
            });
            r1 = completed[0];
        }
        ResponseFunctionToolCall call = r1.output().stream().filter(ResponseOutputItem::isFunctionCall).map(ResponseOutputItem::asFunctionCall)
                .findFirst().orElseThrow(() -> new AssertionError("no function call in " + r1.output()));
        assertEquals("get_weather", call.name());
        assertTrue(call.arguments().contains("Madrid"), call.arguments());
        assertEquals(call.arguments(), String.join("", argumentDeltas), "the streamed argument pieces add up to the arguments");
        assertTrue(argumentDeltas.size() >= 2, "arguments stream parameter by parameter: " + argumentDeltas);
        List<ResponseInputItem> input = new ArrayList<>();
        input.add(ResponseInputItem.ofEasyInputMessage(question));
        input.add(ResponseInputItem.ofFunctionCall(call));
        input.add(ResponseInputItem.ofFunctionCallOutput(ResponseInputItem.FunctionCallOutput.builder().callId(call.callId())
                .output("{\"city\": \"Madrid\", \"temperature\": 21, \"unit\": \"\\u00b0C\", \"condition\": \"sunny\"}").build()));
        Response r2 = client.responses().create(ResponseCreateParams.builder().model("spindle-chat-target").inputOfResponse(input)
                .addTool(weatherTool()).temperature(0.0).maxOutputTokens(300L).build());
        String answer = r2.output().stream().filter(ResponseOutputItem::isMessage)
                .flatMap(m -> m.asMessage().content().stream()).filter(c -> c.isOutputText()).map(c -> c.asOutputText().text()).reduce("", String::concat);
        System.out.println("[openai-java responses] " + call.arguments() + " -> " + answer);
        assertTrue(answer.contains("21"), answer);
    }

    @Test
    void storedResponsesAreContinuedFetchedAndDeleted() {
        String id = http().body("{\"input\": \"What is 58 + 27?\", \"max_output_tokens\": 200, \"temperature\": 0}").post("/v1/responses")
                .then().statusCode(200).body("object", equalTo("response")).body("status", equalTo("completed"))
                .body("output[0].type", equalTo("reasoning")).body("output[1].content[0].text", containsString("85"))
                .extract().path("id");
        http().get("/v1/responses/" + id).then().statusCode(200).body("id", equalTo(id));
        http().body("{\"previous_response_id\": \"" + id + "\", \"input\": \"And 10 + 5?\", \"max_output_tokens\": 200, \"temperature\": 0}")
                .post("/v1/responses").then().statusCode(200).body("previous_response_id", equalTo(id));
        http().delete("/v1/responses/" + id).then().statusCode(200).body("deleted", equalTo(true));
        http().get("/v1/responses/" + id).then().statusCode(404).body("error.message", containsString(id));
        http().body("{\"previous_response_id\": \"resp_nope\", \"input\": \"hi\"}").post("/v1/responses").then().statusCode(404)
                .body("error.param", equalTo("previous_response_id"));
        String unstored = http().body("{\"input\": \"hi\", \"store\": false, \"max_output_tokens\": 5}").post("/v1/responses").then().statusCode(200)
                .body("store", equalTo(false)).extract().path("id");
        http().get("/v1/responses/" + unstored).then().statusCode(404);
        // reasoning effort none turns the template's thinking off: no reasoning item
        http().body("{\"input\": \"What is 58 + 27?\", \"reasoning\": {\"effort\": \"none\"}, \"max_output_tokens\": 100, \"temperature\": 0}")
                .post("/v1/responses").then().statusCode(200).body("output[0].type", equalTo("message"));
        // encrypted_content carries the reasoning back to a stateless follow-up
        String blob = http().body("{\"input\": \"What is 58 + 27?\", \"store\": false, \"include\": [\"reasoning.encrypted_content\"], \"max_output_tokens\": 200,"
                + " \"temperature\": 0}").post("/v1/responses").then().statusCode(200).extract().path("output[0].encrypted_content");
        assertTrue(blob.startsWith("spindle-reasoning:"), blob);
    }

    /** Bad input for both new APIs: a 4xx in the API's own shape, naming the field, and the server serves on. */
    @Test
    void badInputIsRefusedInEachApisShape() {
        String[][] responses = {
                {"{\"input\": 5}", "input"},
                {"{}", "input"},
                {"{\"input\": [{\"type\": \"computer_call_output\"}]}", "input[0].type"},
                {"{\"input\": [{\"role\": \"robot\", \"content\": \"hi\"}]}", "input[0].role"},
                {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": \"x\"}]}]}", "input[0].content[0].type"},
                {"{\"input\": [{\"type\": \"function_call_output\", \"output\": \"x\"}]}", "input[0].call_id"},
                {"{\"input\": \"hi\", \"max_output_tokens\": \"many\"}", "max_output_tokens"},
                {"{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"xml\"}}}", "text.format.type"},
                {"{\"input\": \"hi\", \"reasoning\": {\"effort\": \"extreme\"}}", "reasoning.effort"},
                {"{\"input\": \"hi\", \"tools\": [{\"type\": \"function\"}]}", "tools[0].name"},
                {"{\"input\": \"hi\", \"background\": true}", "background"},
                {"{\"input\": \"hi\", \"truncation\": \"auto\"}", "truncation"},
        };
        for (String[] c : responses) {
            http().body(c[0]).post("/v1/responses").then().statusCode(400).body("error.param", equalTo(c[1])).body("error.type", equalTo("invalid_request_error"));
        }
        String[][] messages = {
                {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "max_tokens"},
                {"{\"max_tokens\": 5}", "messages"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}", "messages.0.role"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {}}]}]}", "messages.0.content.0"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_use\", \"id\": \"a\", \"name\": \"b\"}]}]}", "messages.0.content.0"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"name\": \"x\"}]}", "tools.0.input_schema"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tool_choice\": {\"type\": \"all\"}}", "tool_choice.type"},
                {"{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"thinking\": {\"type\": \"maybe\"}}", "thinking.type"},
                {"{\"max_tokens\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "max_tokens"},
        };
        for (String[] c : messages) {
            ValidatableResponse r = http().body(c[0]).post("/v1/messages").then().statusCode(400).body("type", equalTo("error"))
                    .body("error.type", equalTo("invalid_request_error"));
            String message = r.extract().path("error.message");
            assertTrue(message.startsWith(c[1]) || message.contains(c[1]), c[0] + " -> " + message);
        }
        http().body("{not json").post("/v1/messages").then().statusCode(400).body("type", equalTo("error"));
        http().get("/v1/messages/nothing").then().statusCode(404).body("type", equalTo("error")).body("error.type", equalTo("not_found_error"));
        http().get("/v1/nothing").then().statusCode(404).body("error.type", equalTo("not_found_error"));
        http().get("/v1/chat/completions").then().statusCode(405).header("Allow", "POST").body("error.message", containsString("POST"));
        http().put("/v1/messages").then().statusCode(405).body("type", equalTo("error")).body("error.type", equalTo("invalid_request_error"));
        http().get("/v1/models/other").then().statusCode(404).body("error.param", equalTo("model"));
        http().get("/v1/models/spindle-chat-target").then().statusCode(200).body("id", equalTo("spindle-chat-target")).body("created", not(equalTo(0)));
        // oversized bodies (sent with Expect: 100-continue, so the refusal arrives before the body is sent)
        assertEquals("request_too_large", oversized("/v1/messages").path("error").path("type").asText());
        assertTrue(oversized("/v1/responses").path("error").path("message").asText().contains("MiB"));
        // and the server serves on
        http().body("{\"max_tokens\": 40, \"messages\": [{\"role\": \"user\", \"content\": \"What is 58 + 27?\"}], \"temperature\": 0}").post("/v1/messages")
                .then().statusCode(200).body("type", equalTo("message")).body("stop_reason", notNullValue());
    }

    JsonNode oversized(String path) {
        try {
            var http = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
            var request = java.net.http.HttpRequest.newBuilder(java.net.URI.create(v1.toString().replaceAll("/v1/?$", "") + path)).expectContinue(true)
                    .header("Content-Type", "application/json").POST(java.net.http.HttpRequest.BodyPublishers.ofString("{\"input\": \"" + "x".repeat(33 << 20) + "\"}")).build();
            var response = http.send(request, java.net.http.HttpResponse.BodyHandlers.ofString());
            assertEquals(413, response.statusCode(), response.body());
            return JSON.readTree(response.body());
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Chat completions stream a tool call as it is written: id and name first, then the arguments piece by piece. */
    @Test
    void chatCompletionsStreamToolArgumentsAsWritten() throws Exception {
        String body = "{\"messages\": [{\"role\": \"user\", \"content\": \"What's the weather in Madrid?\"}], \"stream\": true, \"temperature\": 0, \"max_tokens\": 300,"
                + " \"tools\": " + OpenAiServerTest.TOOLS + "}";
        String sse = http().body(body).post("/v1/chat/completions").then().statusCode(200).extract().asString();
        List<JsonNode> pieces = new ArrayList<>();
        for (String line : sse.split("\n")) {
            if (line.startsWith("data: {")) {
                JsonNode delta = JSON.readTree(line.substring(6)).path("choices").path(0).path("delta");
                delta.path("tool_calls").forEach(pieces::add);
            }
        }
        assertTrue(pieces.size() >= 3, "a header and several argument pieces: " + pieces);
        assertEquals("get_weather", pieces.getFirst().path("function").path("name").asText(), pieces.toString());
        assertTrue(pieces.getFirst().path("id").asText().startsWith("call_"), pieces.toString());
        assertTrue(pieces.stream().skip(1).noneMatch(p -> p.has("id") || p.path("function").has("name")), pieces.toString());
        StringBuilder args = new StringBuilder();
        pieces.forEach(p -> args.append(p.path("function").path("arguments").asText()));
        assertEquals("Madrid", JSON.readTree(args.toString()).path("city").asText(), args.toString());
        assertTrue(sse.contains("\"finish_reason\":\"tool_calls\""), sse);
    }

    /** openai-java's stream accumulator rebuilds a streamed call from its pieces. */
    @Test
    void openAiJavaAccumulatesAStreamedToolCall() throws Exception {
        var params = com.openai.models.chat.completions.ChatCompletionCreateParams.builder().model("spindle-chat-target")
                .addUserMessage("What's the weather in Madrid?").temperature(0.0).maxCompletionTokens(300)
                .putAdditionalBodyProperty("tools", JsonValue.from(JSON.readValue(OpenAiServerTest.TOOLS, List.class))).build();
        var accumulator = com.openai.helpers.ChatCompletionAccumulator.create();
        int[] chunks = {0};
        try (var stream = client().chat().completions().createStreaming(params)) {
            stream.stream().forEach(chunk -> {
                accumulator.accumulate(chunk);
                if (chunk.choices().stream().anyMatch(c -> c.delta().toolCalls().isPresent())) {
                    chunks[0]++;
                }
            });
        }
        var message = accumulator.chatCompletion().choices().getFirst().message();
        var call = message.toolCalls().orElseThrow().getFirst().asFunction();
        assertEquals("get_weather", call.function().name());
        assertEquals("Madrid", JSON.readTree(call.function().arguments()).path("city").asText(), call.function().arguments());
        assertTrue(chunks[0] >= 3, "the call came in pieces: " + chunks[0]);
    }

    @Test
    void vllmExtensionsHaveTheirEffect() throws Exception {
        String noThink = ", \"chat_template_kwargs\": {\"enable_thinking\": false}, \"temperature\": 0";
        String ask = "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 58 + 27?\"}]" + noThink;
        String plain = http().body(ask + ", \"max_tokens\": 80}").post("/v1/chat/completions").then().statusCode(200)
                .extract().path("choices[0].message.content");
        assertTrue(plain.contains("90"), plain);
        // bad_words: the word never appears
        String banned = http().body(ask + ", \"max_tokens\": 80, \"bad_words\": [\"90\"]}").post("/v1/chat/completions").then().statusCode(200)
                .extract().path("choices[0].message.content");
        assertFalse(banned.contains("90"), banned);
        // min_tokens: no end before it (the plain reply ends after a few tokens)
        int plainTokens = http().body(ask + ", \"max_tokens\": 80}").post("/v1/chat/completions").then().extract().path("usage.completion_tokens");
        assertTrue(plainTokens < 30, "the plain reply is short: " + plainTokens);
        http().body(ask + ", \"max_tokens\": 60, \"min_tokens\": 30}").post("/v1/chat/completions").then().statusCode(200)
                .body("usage.completion_tokens", org.hamcrest.Matchers.greaterThanOrEqualTo(30));
        // include_stop_str_in_output and stop_reason
        http().body(ask + ", \"max_tokens\": 80, \"stop\": [\"27\"], \"include_stop_str_in_output\": true}").post("/v1/chat/completions").then()
                .statusCode(200).body("choices[0].message.content", equalTo("58 + 27")).body("choices[0].stop_reason", equalTo("27"));
        http().body(ask + ", \"max_tokens\": 80, \"stop\": [\"27\"]}").post("/v1/chat/completions").then()
                .statusCode(200).body("choices[0].message.content", equalTo("58 + ")).body("choices[0].stop_reason", equalTo("27"));
        // allowed_token_ids and return_tokens_as_token_ids
        JsonNode r = JSON.readTree(http().body("{\"prompt\": \"Hello\", \"max_tokens\": 6, \"allowed_token_ids\": [100, 200], \"logprobs\": 1,"
                + " \"return_tokens_as_token_ids\": true, \"temperature\": 1.0, \"seed\": 4}").post("/v1/completions").then().statusCode(200).extract().asString());
        for (JsonNode t : r.path("choices").path(0).path("logprobs").path("tokens")) {
            assertTrue(t.asText().equals("token_id:100") || t.asText().equals("token_id:200"), r.toString());
        }
        // continue_final_message: the assistant's text is continued, not answered anew
        http().body("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 58 + 27?\"}, {\"role\": \"assistant\", \"content\": \"58 + 27 =\"}],"
                + " \"continue_final_message\": true, \"add_generation_prompt\": false, \"max_tokens\": 10, \"temperature\": 0}").post("/v1/chat/completions")
                .then().statusCode(200).body("choices[0].message.content", not(startsWith("58")));
        // truncate_prompt_tokens keeps the prompt's last tokens
        http().body("{\"prompt\": \"Hello world, this is a longer prompt\", \"max_tokens\": 1, \"truncate_prompt_tokens\": 3}").post("/v1/completions")
                .then().statusCode(200).body("usage.prompt_tokens", equalTo(3));
        // prompt_logprobs: one entry per prompt token, null first
        JsonNode pl = JSON.readTree(http().body("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1, \"prompt_logprobs\": 2}")
                .post("/v1/chat/completions").then().statusCode(200).extract().asString());
        int promptTokens = pl.path("usage").path("prompt_tokens").asInt();
        assertEquals(promptTokens, pl.path("prompt_logprobs").size(), pl.toString());
        assertTrue(pl.path("prompt_logprobs").path(0).isNull() && pl.path("prompt_logprobs").path(1).isObject(), pl.toString());
        // guided_json and structured_outputs.json as response_format
        String json = http().body("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 60, \"guided_json\": {\"type\": \"object\","
                + " \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"additionalProperties\": false}" + noThink + "}")
                .post("/v1/chat/completions").then().statusCode(200).extract().path("choices[0].message.content");
        assertTrue(JSON.readTree(json).path("a").isIntegralNumber(), json);
        // a list of prompts: one choice each
        http().body("{\"prompt\": [\"Hello\", \"Goodbye\"], \"max_tokens\": 2, \"n\": 2}").post("/v1/completions").then().statusCode(200)
                .body("choices.size()", equalTo(4)).body("choices[3].index", equalTo(3));
        // what is not implemented is refused, naming the field
        for (String[] c : new String[][]{{"\"best_of\": 3", "best_of"}, {"\"use_beam_search\": true", "use_beam_search"}, {"\"guided_regex\": \"a+\"", "guided_regex"},
                {"\"structured_outputs\": {\"choice\": [\"a\"]}", "structured_outputs.choice"}, {"\"top_logprobs\": 21, \"logprobs\": true", "top_logprobs"},
                {"\"echo\": true", "echo"}, {"\"chat_template\": \"{{ x }}\"", "chat_template"}}) {
            http().body("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], " + c[0] + "}").post("/v1/chat/completions").then().statusCode(400)
                    .body("error.param", equalTo(c[1]));
        }
        http().body("{\"prompt\": \"hi\", \"suffix\": \"end\"}").post("/v1/completions").then().statusCode(400).body("error.param", equalTo("suffix"));
    }
}

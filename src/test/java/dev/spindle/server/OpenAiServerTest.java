package dev.spindle.server;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.RestAssured;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The real server (Quarkus, the bundled chat model on the CPU backend) driven over HTTP:
 * the official OpenAI Java client for chat completions, plain HTTP for what that client
 * cannot show (the npm client's Accept header, raw tool-call JSON, errors).
 */
@QuarkusTest
class OpenAiServerTest {
    @TestHTTPResource("/v1")
    URL v1;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    @Inject
    ModelService service;

    static final String TOOLS = """
            [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
              "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
             {"type": "function", "function": {"name": "get_time", "description": "Current local time in a city.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
             {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]""";

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().apiKey("unused").baseUrl(v1.toString()).build();
    }

    static ChatCompletionCreateParams ask(String question, double temperature, Long seed) {
        var b = ChatCompletionCreateParams.builder().model("spindle-chat-target").addUserMessage(question).temperature(temperature).maxCompletionTokens(200);
        if (seed != null) {
            b.seed(seed);
        }
        return b.build();
    }

    @Test
    void officialJavaClientGetsTheRightAnswer() {
        ChatCompletion c = client().chat().completions().create(ask("What is 58 + 27?", 0, null));
        String content = c.choices().getFirst().message().content().orElse("");
        System.out.println("[server] " + content + " | usage " + c.usage().orElseThrow());
        assertTrue(content.contains("85"), content);
        assertEquals(ChatCompletion.Choice.FinishReason.STOP, c.choices().getFirst().finishReason());
        assertTrue(c.usage().orElseThrow().completionTokens() > 5);
    }

    @Test
    void officialJavaClientStreams() {
        StringBuilder content = new StringBuilder();
        int chunks = 0;
        try (StreamResponse<ChatCompletionChunk> s = client().chat().completions().createStreaming(ask("What is 12 + 30?", 0, null))) {
            for (Iterator<ChatCompletionChunk> it = s.stream().iterator(); it.hasNext(); ) {
                ChatCompletionChunk ch = it.next();
                chunks++;
                if (!ch.choices().isEmpty()) {
                    ch.choices().getFirst().delta().content().ifPresent(content::append);
                }
            }
        }
        assertTrue(chunks > 5, "many chunks: " + chunks);
        assertTrue(content.toString().contains("42"), content.toString());
    }

    /** The official client end to end for tools (required), json_schema, logprobs and errors. */
    @Test
    void officialJavaClientToolsSchemaLogprobsAndErrors() {
        OpenAIClient client = client();
        ChatCompletion tools = client.chat().completions().create(ChatCompletionCreateParams.builder().model("spindle-chat-target")
                .addUserMessage("What's the weather in Oslo?").temperature(0.0).maxCompletionTokens(200)
                .putAdditionalBodyProperty("tools", com.openai.core.JsonValue.from(readTree(TOOLS)))
                .putAdditionalBodyProperty("tool_choice", com.openai.core.JsonValue.from("required")).build());
        var calls = tools.choices().getFirst().message().toolCalls().orElseThrow();
        assertEquals(1, calls.size());
        var fn = calls.getFirst().asFunction().function();
        assertEquals("get_weather", fn.name());
        assertTrue(fn.arguments().contains("Oslo"), fn.arguments());
        assertEquals(ChatCompletion.Choice.FinishReason.TOOL_CALLS, tools.choices().getFirst().finishReason());

        ChatCompletion json = client.chat().completions().create(ChatCompletionCreateParams.builder().model("spindle-chat-target")
                .addUserMessage("What is 58 + 27?").temperature(0.0).maxCompletionTokens(200)
                .putAdditionalBodyProperty("response_format", com.openai.core.JsonValue.from(readTree("{\"type\": \"json_schema\", \"json_schema\":"
                        + " {\"name\": \"a\", \"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"answer\": {\"type\": \"integer\"}},"
                        + " \"required\": [\"answer\"], \"additionalProperties\": false}}}"))).build());
        assertTrue(readTree(json.choices().getFirst().message().content().orElseThrow()).get("answer").isIntegralNumber());

        ChatCompletion lp = client.chat().completions().create(ChatCompletionCreateParams.builder().model("spindle-chat-target")
                .addUserMessage("What is 2 + 2?").temperature(0.0).maxCompletionTokens(10).logprobs(true).topLogprobs(2L).build());
        var content = lp.choices().getFirst().logprobs().orElseThrow().content().orElseThrow();
        assertEquals(10, content.size());
        assertTrue(content.stream().allMatch(t -> t.logprob() <= 0 && t.topLogprobs().size() == 2));

        // max_tokens past the context is a ceiling, cut to what the context leaves (as vLLM does)
        ChatCompletion big = client.chat().completions().create(
                ChatCompletionCreateParams.builder().model("spindle-chat-target").addUserMessage("a").maxCompletionTokens(100000L).build());
        assertTrue(big.usage().orElseThrow().totalTokens() <= 2048, "within the context: " + big.usage());
    }

    /** The npm client sends Accept: application/json even when streaming: it must still get SSE. */
    @Test
    void streamingAnswersSseWhateverTheAcceptHeader() {
        Response r = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).header("Accept", "application/json")
                .contentType("application/json")
                .body("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2 + 3?\"}], \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}")
                .post("/v1/chat/completions");
        assertEquals(200, r.statusCode());
        assertTrue(r.contentType().startsWith("text/event-stream"), r.contentType());
        String body = r.asString();
        assertTrue(body.contains("\"reasoning_content\""), "reasoning streams separately");
        assertTrue(body.contains("\"usage\""), "include_usage adds a usage chunk");
        assertTrue(body.trim().endsWith("data: [DONE]"), body.substring(Math.max(0, body.length() - 200)));
    }

    @Test
    void callsTheWeatherTool() {
        Response r = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json")
                .body("{\"messages\": [{\"role\": \"user\", \"content\": \"What's the weather in Berlin?\"}], \"temperature\": 0, \"tools\": " + TOOLS + "}")
                .post("/v1/chat/completions");
        assertEquals(200, r.statusCode(), r.asString());
        assertEquals("tool_calls", r.jsonPath().getString("choices[0].finish_reason"), r.asString());
        assertEquals("get_weather", r.jsonPath().getString("choices[0].message.tool_calls[0].function.name"));
        assertTrue(r.jsonPath().getString("choices[0].message.tool_calls[0].function.arguments").contains("\"city\":\"Berlin\""), r.asString());
    }

    /** 16 streaming requests at once produce exactly the tokens each produces alone (seeded sampling). */
    @Test
    void sixteenConcurrentStreamsEqualSoloRuns() throws Exception {
        OpenAIClient client = client();
        String[] questions = {"How many minutes are in 7 hours?", "What is 17 + 25?", "Is 2024 a leap year?", "How many r's are in strawberry?"};
        String[] solo = new String[questions.length];
        for (int i = 0; i < questions.length; i++) {
            solo[i] = streamed(client, ask(questions[i], 0.9, 1000L + i));
        }
        List<CompletableFuture<String>> together = new ArrayList<>();
        for (int c = 0; c < 16; c++) {
            int i = c % questions.length;
            together.add(CompletableFuture.supplyAsync(() -> streamed(client, ask(questions[i], 0.9, 1000L + i))));
        }
        for (int c = 0; c < 16; c++) {
            assertEquals(solo[c % questions.length], together.get(c).get(180, TimeUnit.SECONDS), "stream " + c + " vs its solo run");
        }
    }

    static String streamed(OpenAIClient client, ChatCompletionCreateParams params) {
        StringBuilder b = new StringBuilder();
        try (StreamResponse<ChatCompletionChunk> s = client.chat().completions().createStreaming(params)) {
            s.stream().forEach(ch -> ch.choices().forEach(c -> {
                c.delta()._additionalProperties().getOrDefault("reasoning_content", com.openai.core.JsonValue.from("")).asString()
                        .ifPresent(r -> b.append("[r]").append(r));
                c.delta().content().ifPresent(b::append);
            }));
        }
        return b.toString();
    }

    @Test
    void disconnectingClientFreesItsBlocks() throws Exception {
        try (StreamResponse<ChatCompletionChunk> s = client().chat().completions().createStreaming(
                ChatCompletionCreateParams.builder().model("spindle-chat-target").addUserMessage("What is 12 + 30?").temperature(0.0).maxCompletionTokens(1500)
                        .putAdditionalBodyProperty("ignore_eos", com.openai.core.JsonValue.from(true)).build())) {
            Iterator<ChatCompletionChunk> it = s.stream().iterator();
            it.next();
            it.next();
        }
        long deadline = System.currentTimeMillis() + 10_000;
        while (service.engine().stats().running() > 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(0, service.engine().stats().running(), "the cancelled request left the batch");
        assertEquals(service.engine().stats().kvBlocksTotal(), service.engine().stats().kvBlocksFree(), "and gave its blocks back");
    }

    @Test
    void stopStringsNeverLeak() {
        Response r = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json")
                .body("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 58 + 27?\"}], \"temperature\": 0, \"chat_template_kwargs\": {\"enable_thinking\": false}, \"stop\": [\" = \"]}")
                .post("/v1/chat/completions");
        assertEquals("58 + 27", r.jsonPath().getString("choices[0].message.content"), r.asString());
        assertEquals("stop", r.jsonPath().getString("choices[0].finish_reason"));
    }

    @Test
    void badRequestsGetClearErrors() {
        var base = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json");
        Response r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"late\"}]}").post("/v1/chat/completions");
        assertEquals(200, r.statusCode(), "a late system message is merged into the system prompt the template allows: " + r.asString());
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"" + "a ".repeat(3000) + "\"}]}").post("/v1/chat/completions");
        assertEquals(400, r.statusCode());
        assertTrue(r.jsonPath().getString("error.message").contains("context"), r.asString());
        r = base.body("{not json").post("/v1/chat/completions");
        assertEquals(400, r.statusCode());
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"temperature\": \"hot\"}").post("/v1/chat/completions");
        assertEquals("temperature", r.jsonPath().getString("error.param"));
        r = base.body("{\"model\": \"gpt-4\", \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}").post("/v1/chat/completions");
        assertEquals(400, r.statusCode());
        assertEquals("model", r.jsonPath().getString("error.param"));
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"max_tokens\": -5}").post("/v1/chat/completions");
        assertEquals(400, r.statusCode());
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"top_p\": 1e308, \"n\": 99999999999}").post("/v1/chat/completions");
        assertEquals(400, r.statusCode(), r.asString());
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"" + "many words ".repeat(3000) + "\"}]}").post("/v1/chat/completions");
        assertEquals(400, r.statusCode());
        assertTrue(r.jsonPath().getString("error.message").contains("context"), r.asString());
        r = base.body(new byte[]{'{', '"', 'm', (byte) 0xff, (byte) 0xfe, '"', ':', '1', '}'}).post("/v1/chat/completions");
        assertEquals(400, r.statusCode(), "invalid UTF-8");
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2 + 2?\"}], \"temperature\": 0, \"unknown_field\": {\"x\": 1}}")
                .post("/v1/chat/completions");
        assertEquals(200, r.statusCode(), "unknown fields are ignored, as OpenAI-compatible servers do");
        // and the server keeps serving
        assertTrue(client().chat().completions().create(ask("What is 2 + 2?", 0, null)).choices().getFirst().message().content().orElse("").contains("4"));
    }

    /** tool_choice required and named are enforced: the reply is always a valid call to an allowed function. */
    @Test
    void forcedToolChoices() {
        var base = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json");
        Response r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2 + 2?\"}], \"temperature\": 0, \"max_tokens\": 300,"
                + " \"tool_choice\": \"required\", \"tools\": " + TOOLS + "}").post("/v1/chat/completions");
        assertEquals(200, r.statusCode(), r.asString());
        System.out.println("[forced] required -> " + r.jsonPath().getString("choices[0].message.tool_calls"));
        assertEquals("tool_calls", r.jsonPath().getString("choices[0].finish_reason"), r.asString());
        assertTrue(List.of("get_weather", "get_time", "calculate").contains(r.jsonPath().getString("choices[0].message.tool_calls[0].function.name")));
        r = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"What's the weather in Paris?\"}], \"temperature\": 0, \"max_tokens\": 300,"
                + " \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, \"tools\": " + TOOLS + "}").post("/v1/chat/completions");
        System.out.println("[forced] named get_time -> " + r.jsonPath().getString("choices[0].message.tool_calls"));
        assertEquals("tool_calls", r.jsonPath().getString("choices[0].finish_reason"), r.asString());
        assertEquals(1, r.jsonPath().getList("choices[0].message.tool_calls").size());
        assertEquals("get_time", r.jsonPath().getString("choices[0].message.tool_calls[0].function.name"));
        assertTrue(r.jsonPath().getString("choices[0].message.tool_calls[0].function.arguments").contains("\"city\""), r.asString());
    }

    /** Structured output: the reply after the reasoning always parses and matches the schema. */
    @Test
    void jsonSchemaResponseFormatIsEnforced() throws Exception {
        String schema = "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"answer\", \"strict\": true, \"schema\": {\"type\": \"object\","
                + " \"properties\": {\"answer\": {\"type\": \"integer\"}}, \"required\": [\"answer\"], \"additionalProperties\": false}}}";
        var base = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json");
        for (String question : List.of("What is 58 + 27?", "How many minutes are in 3 hours?", "Tell me a story.")) {
            Response r = base.body("{\"messages\": [{\"role\": \"system\", \"content\": \"Reply only with a JSON object of the form {\\\"answer\\\": ...}.\"},"
                    + " {\"role\": \"user\", \"content\": \"" + question + "\"}], \"temperature\": 0, \"max_tokens\": 300, \"response_format\": " + schema + "}")
                    .post("/v1/chat/completions");
            assertEquals(200, r.statusCode(), r.asString());
            String content = r.jsonPath().getString("choices[0].message.content");
            var json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(content);
            System.out.println("[structured] " + question + " -> " + content);
            assertTrue(json.isObject() && json.size() == 1 && json.get("answer").isIntegralNumber(), content);
            if (question.contains("58")) {
                assertEquals(85, json.get("answer").asInt());
            }
        }
        Response bad = base.body("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"response_format\": {\"type\": \"json_schema\","
                + " \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"string\", \"pattern\": \"a+\"}}}}").post("/v1/chat/completions");
        assertEquals(400, bad.statusCode());
        assertTrue(bad.jsonPath().getString("error.message").contains("'pattern'"), bad.asString());
    }

    /** echo + logprobs scores a prompt: each prompt token's logprob equals the one the model gives it when generating it. */
    @Test
    void echoWithLogprobsScoresThePrompt() {
        var base = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json");
        List<Integer> prompt = base.body("{\"prompt\": \"<|im_start|>user\\nWhat is 2 + 2?<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\"}")
                .post("/tokenize").jsonPath().getList("tokens", Integer.class);
        Response gen = base.body("{\"prompt\": " + prompt + ", \"max_tokens\": 1, \"temperature\": 0, \"logprobs\": 1}").post("/v1/completions");
        double generatedLp = readTree(gen.asString()).at("/choices/0/logprobs/token_logprobs/0").asDouble();
        String generated = gen.jsonPath().getString("choices[0].text");
        List<Integer> next = base.body("{\"prompt\": \"<|im_start|>user\\nWhat is 2 + 2?<|im_end|>\\n<|im_start|>assistant\\n<think>\\n" + generated + "\"}")
                .post("/tokenize").jsonPath().getList("tokens", Integer.class);
        Response scored = base.body("{\"prompt\": " + next + ", \"max_tokens\": 0, \"echo\": true, \"logprobs\": 2}").post("/v1/completions");
        assertEquals(200, scored.statusCode(), scored.asString());
        List<Object> lps = scored.jsonPath().getList("choices[0].logprobs.token_logprobs");
        assertEquals(next.size(), lps.size());
        assertEquals(null, lps.getFirst());
        var scoredLps = readTree(scored.asString()).at("/choices/0/logprobs/token_logprobs");
        assertEquals(generatedLp, scoredLps.get(scoredLps.size() - 1).asDouble(), 0.0, "the same logprob, bit for bit");
        assertTrue(scored.jsonPath().getString("choices[0].text").endsWith(generated));
    }

    static com.fasterxml.jackson.databind.JsonNode readTree(String s) {
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().readTree(s);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void tokenizeModelsAndMetrics() {
        var base = RestAssured.given().baseUri(v1.toString().replace("/v1", ""));
        assertEquals("spindle-chat-target", base.get("/v1/models").jsonPath().getString("data[0].id"));
        Response t = base.contentType("application/json").body("{\"prompt\": \"hello world\"}").post("/tokenize");
        List<Integer> ids = t.jsonPath().getList("tokens", Integer.class);
        assertEquals(service.tokenizer().addedTokenId("<|im_start|>"), ids.getFirst());
        Response d = base.contentType("application/json").body("{\"tokens\": " + ids.subList(1, ids.size()) + "}").post("/detokenize");
        assertEquals("hello world", d.jsonPath().getString("prompt"));
        String metrics = base.get("/q/metrics").asString();
        assertTrue(metrics.contains("spindle_generation_tokens_total") && metrics.contains("spindle_prefix_cache_hit_rate"), "metrics exported");
        assertEquals(200, base.get("/q/health/ready").statusCode());
        String openapi = base.get("/q/openapi").asString();
        assertTrue(openapi.contains("/v1/chat/completions") && openapi.contains("ChatCompletionRequest"), "OpenAPI document served");
        for (String path : List.of("/v1/responses", "/v1/responses/{id}", "/v1/messages", "/v1/messages/count_tokens", "/v1/models/{id}")) {
            assertTrue(openapi.contains(path + ":"), "the OpenAPI document describes " + path);
        }
    }
}

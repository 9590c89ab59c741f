package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.models.FunctionDefinition;
import com.openai.models.FunctionParameters;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionMessage;
import com.openai.models.chat.completions.ChatCompletionMessageToolCall;
import com.openai.models.chat.completions.ChatCompletionToolMessageParam;
import dev.langchain4j.agent.tool.P;
import dev.langchain4j.agent.tool.Tool;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.service.AiServices;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.RestAssured;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Whole tool-using turns through the real server, as agents run them: the model calls a
 * tool, the client sends the assistant message it got back (arguments as a JSON string,
 * as OpenAI's API has them) with the tool's result, and the model answers. With the official
 * Java client's message round trip and LangChain4j's AiServices, greedy and sampled at the
 * model's recommended temperatures.
 */
@QuarkusTest
class AgentLoopTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/v1")
    URL v1;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    /**
     * What the tools return: fixed readings, so that the final answer is checkable, written as Python's
     * json.dumps writes them (the toy model saw tool results only in that form in training).
     */
    static String runTool(String name, JsonNode args) {
        return switch (name) {
            case "get_weather" -> "{\"city\": \"" + args.path("city").asText() + "\", \"temperature\": 21, \"unit\": \"\\u00b0C\", \"condition\": \"sunny\"}";
            case "get_time" -> "{\"city\": \"" + args.path("city").asText() + "\", \"time\": \"14:05\"}";
            case "calculate" -> "{\"result\": 5555}";
            default -> throw new AssertionError("the model called a tool that was not offered: " + name);
        };
    }

    static FunctionDefinition function(String name, String description, Map<String, Object> properties) {
        return FunctionDefinition.builder().name(name).description(description).parameters(FunctionParameters.builder()
                .putAdditionalProperty("type", JsonValue.from("object")).putAdditionalProperty("properties", JsonValue.from(properties))
                .putAdditionalProperty("required", JsonValue.from(List.copyOf(properties.keySet()).subList(0, 1))).build()).build();
    }

    record Turn(List<String> calls, String answer, int requests, String finish) {
    }

    /** The official Java client's loop: add the returned message, then one tool message per call, until an answer. */
    Turn openAiJavaLoop(String question, double temperature, Long seed) throws Exception {
        OpenAIClient client = OpenAIOkHttpClient.builder().apiKey("unused").baseUrl(v1.toString()).build();
        var params = ChatCompletionCreateParams.builder().model("spindle-chat-target").addUserMessage(question).temperature(temperature)
                .maxCompletionTokens(300)
                .addFunctionTool(function("get_weather", "Current weather for a city.", Map.of("city", Map.of("type", "string", "description", "City name"))))
                .addFunctionTool(function("get_time", "Current local time in a city.", Map.of("city", Map.of("type", "string"))))
                .addFunctionTool(function("calculate", "Evaluate an arithmetic expression.", Map.of("expression", Map.of("type", "string"))));
        if (seed != null) {
            params.seed(seed);
        }
        List<String> calls = new ArrayList<>();
        for (int request = 1; request <= 4; request++) {
            ChatCompletion c = client.chat().completions().create(params.build());
            ChatCompletionMessage m = c.choices().getFirst().message();
            params.addMessage(m);
            List<ChatCompletionMessageToolCall> toolCalls = m.toolCalls().orElse(List.of());
            String finish = c.choices().getFirst().finishReason().asString();
            if (toolCalls.isEmpty()) {
                return new Turn(calls, m.content().orElse(""), request, finish);
            }
            if (finish.equals("length")) {
                // the reply ran into max_tokens after completing calls (a further call it had opened is not released):
                // its complete calls come with finish_reason length, as vLLM gives them, and the turn ends there
                for (ChatCompletionMessageToolCall call : toolCalls) {
                    calls.add(call.asFunction().function().name() + " " + JSON.readTree(call.asFunction().function().arguments()));
                }
                return new Turn(calls, m.content().orElse(""), request, finish);
            }
            assertEquals(ChatCompletion.Choice.FinishReason.TOOL_CALLS, c.choices().getFirst().finishReason());
            for (ChatCompletionMessageToolCall call : toolCalls) {
                var f = call.asFunction();
                JsonNode args = JSON.readTree(f.function().arguments()); // a forced or lazily constrained call always parses
                calls.add(f.function().name() + " " + args);
                params.addMessage(ChatCompletionToolMessageParam.builder().toolCallId(f.id()).content(runTool(f.function().name(), args)).build());
            }
        }
        throw new AssertionError("no answer after 4 requests: " + calls);
    }

    @Test
    void officialJavaClientCompletesAToolTurn() throws Exception {
        Turn t = openAiJavaLoop("What's the weather in Madrid?", 0, null);
        System.out.println("[agent openai-java] " + t);
        assertEquals(List.of("get_weather {\"city\":\"Madrid\"}"), t.calls());
        // the client sends its assistant message back without reasoning_content, a turn the toy model never saw
        // in training: it reads the condition from the tool's result, not always the temperature
        assertTrue(t.answer().contains("sunny") && t.answer().contains("Madrid"), t.answer());
        assertEquals("stop", t.finish());
        assertEquals(2, t.requests());
    }

    /**
     * Sampled as the publisher recommends: every call made is well formed and typed (the lazy grammar holds
     * once the model opens a call), and most turns end in an answer (a string argument may still wander
     * until max_tokens; such a turn ends with finish_reason length, never with a broken call).
     */
    @Test
    void sampledToolTurnsComplete() throws Exception {
        int answered = 0, turns = 0;
        for (double temperature : new double[]{0.6, 1.0}) {
            for (long seed = 1; seed <= 4; seed++) {
                Turn t = openAiJavaLoop("What's the weather in Paris?", temperature, seed);
                System.out.println("[agent sampled T=" + temperature + " seed " + seed + "] " + t);
                turns++;
                if (t.finish().equals("stop")) {
                    assertFalse(t.answer().isBlank(), "a final answer: " + t);
                    answered++;
                } else {
                    assertEquals("length", t.finish(), t.toString());
                }
                for (String call : t.calls()) {
                    assertTrue(call.matches("(get_weather|get_time) \\{\"city\":\"[^\"]*\"}|calculate \\{\"expression\":\"[^\"]*\"}"), call);
                }
            }
        }
        System.out.printf("[agent sampled] %d of %d turns answered%n", answered, turns);
        assertTrue(answered >= turns / 2, answered + " of " + turns + " turns answered");
    }

    /** LangChain4j's agent helper: a Java method as the tool, the loop inside AiServices. */
    public static class WeatherTools {
        final List<String> calls = new ArrayList<>();

        @Tool("Current weather for a city.")
        public String get_weather(@P("City name") String city) {
            calls.add(city);
            return runTool("get_weather", JSON.createObjectNode().put("city", city));
        }
    }

    interface Assistant {
        String chat(String message);
    }

    @Test
    void langChain4jAiServicesCompletesAToolTurn() {
        WeatherTools tools = new WeatherTools();
        Assistant assistant = AiServices.builder(Assistant.class)
                .chatModel(OpenAiChatModel.builder().baseUrl(v1.toString()).apiKey("unused").modelName("spindle-chat-target").temperature(0.0)
                        .maxTokens(300).build())
                .tools(tools).build();
        String answer = assistant.chat("What's the weather in Oslo?");
        System.out.println("[agent langchain4j] calls " + tools.calls + " -> " + answer);
        assertEquals(List.of("Oslo"), tools.calls);
        assertTrue(answer.contains("21"), answer);
    }

    Response post(String body) {
        return RestAssured.given().baseUri(v1.toString()).contentType("application/json").body(body).post("/chat/completions");
    }

    @Test
    void toolResultsAreAcceptedInEitherArgumentForm() {
        String history = """
                {"messages": [{"role": "user", "content": "What's the weather in Lima?"},
                  {"role": "assistant", "content": null, "reasoning_content": "The user asks about the weather in Lima. I should call get_weather with city Lima.",
                   "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": ARGS}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\\"city\\": \\"Lima\\", \\"temperature\\": 21, \\"unit\\": \\"\\\\u00b0C\\", \\"condition\\": \\"sunny\\"}"}],
                 "temperature": 0, "max_tokens": 200, "tools": TOOLS}""".replace("TOOLS", OpenAiServerTest.TOOLS);
        Response asString = post(history.replace("ARGS", "\"{\\\"city\\\": \\\"Lima\\\"}\""));
        assertEquals(200, asString.statusCode(), asString.asString());
        Response asObject = post(history.replace("ARGS", "{\"city\": \"Lima\"}"));
        assertEquals(200, asObject.statusCode(), asObject.asString());
        assertEquals(asString.jsonPath().getString("choices[0].message.content"), asObject.jsonPath().getString("choices[0].message.content"),
                "the same prompt either way");
        assertTrue(asString.jsonPath().getString("choices[0].message.content").contains("21"), asString.asString());
        Response bad = post(history.replace("ARGS", "\"{city: Lima\""));
        assertEquals(400, bad.statusCode());
        assertEquals("messages[1].tool_calls[0].function.arguments", bad.jsonPath().getString("error.param"), bad.asString());
        Response issue = post("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\","
                + "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}], \"max_tokens\": 5}");
        assertEquals(200, issue.statusCode(), issue.asString());
    }

    /** Parallel calls and their results render as the template expects: every call, then one tool_response per result. */
    @Test
    void parallelCallsAndTheirResultsRender() {
        String body = """
                {"messages": [{"role": "user", "content": "Weather in Oslo and time in Lima?"},
                  {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}},
                    {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": {"city": "Lima"}}}]},
                  {"role": "tool", "tool_call_id": "a", "content": "sunny"},
                  {"role": "tool", "tool_call_id": "b", "content": "14:05"}],
                 "tools": TOOLS}""".replace("TOOLS", OpenAiServerTest.TOOLS);
        Response r = RestAssured.given().baseUri(v1.toString().replace("/v1", "")).contentType("application/json").body(body).post("/tokenize");
        assertEquals(200, r.statusCode(), r.asString());
        String prompt = r.jsonPath().getString("prompt");
        assertTrue(prompt.contains("<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=city>\nLima\n</parameter>"), prompt);
        assertTrue(prompt.contains("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n14:05\n</tool_response><|im_end|>"), prompt);
    }

    /** tool_choice "none": the tools stay out of the prompt and the reply carries no call. */
    @Test
    void toolChoiceNoneLeavesTheToolsOut() {
        String ask = "{\"messages\": [{\"role\": \"user\", \"content\": \"What's the weather in Madrid?\"}], \"temperature\": 0, \"max_tokens\": 120,"
                + " \"tools\": " + OpenAiServerTest.TOOLS + ", \"tool_choice\": CHOICE}";
        Response auto = post(ask.replace("CHOICE", "\"auto\""));
        Response none = post(ask.replace("CHOICE", "\"none\""));
        assertEquals("tool_calls", auto.jsonPath().getString("choices[0].finish_reason"), auto.asString());
        assertEquals(200, none.statusCode(), none.asString());
        assertTrue(none.jsonPath().getList("choices[0].message.tool_calls") == null, none.asString());
        assertTrue(none.jsonPath().getInt("usage.prompt_tokens") < auto.jsonPath().getInt("usage.prompt_tokens") - 100,
                "no tool definitions in the prompt: " + none.jsonPath().getInt("usage.prompt_tokens") + " vs " + auto.jsonPath().getInt("usage.prompt_tokens"));
    }
}

package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.RestAssured;
import io.restassured.response.Response;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Responses API against the Open Responses specification ({@link OpenResponsesSchema}): every
 * response object, output item and streamed event of plain, tool-calling, structured, cut-off and stored
 * replies validates, streams end with {@code [DONE]}; and requests shaped as Codex sends them
 * (developer items after user turns, namespace tools, custom tools with a grammar, their calls sent back)
 * are served with the items Codex reads.
 *
 * <p>One documented departure: the reasoning text streams under OpenAI's event names
 * ({@code response.reasoning_text.delta}/{@code .done}, which the OpenAI SDKs, Codex and the Agents SDK
 * read) where the specification names them {@code response.reasoning.delta}/{@code .done}; those events
 * are validated against the specification's shapes under its names.
 */
@QuarkusTest
class ResponsesConformanceTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TestHTTPResource("/v1")
    URL v1;

    @BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    /** The body of a 200 answer (else the failure shows the body). */
    static String ok(Response r) {
        assertEquals(200, r.statusCode(), r.asString());
        return r.asString();
    }

    RequestSpecification http() {
        return RestAssured.given().baseUri(v1.toString().replaceAll("/v1/?$", "")).contentType("application/json");
    }

    static final String WEATHER = "{\"type\": \"function\", \"name\": \"get_weather\", \"description\": \"Current weather for a city.\","
            + " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
            + " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}";

    /** Bodies covering each kind of reply: text with reasoning, a function call, structured output, a cut-off message. */
    static List<String> bodies() {
        return List.of(
                "{\"input\": \"What is 58 + 27?\", \"max_output_tokens\": 300, \"temperature\": 0}",
                "{\"input\": \"What's the weather in Madrid?\", \"tools\": [" + WEATHER + "], \"max_output_tokens\": 300, \"temperature\": 0}",
                "{\"input\": \"What is 58 + 27?\", \"instructions\": \"Reply only with a JSON object of the form {\\\"answer\\\": ...}.\","
                        + " \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"sum\", \"strict\": true, \"schema\": {\"type\": \"object\","
                        + " \"properties\": {\"answer\": {\"type\": \"integer\"}}, \"required\": [\"answer\"], \"additionalProperties\": false}}},"
                        + " \"max_output_tokens\": 300, \"temperature\": 0}",
                "{\"input\": \"Count the letters r in strawberry.\", \"reasoning\": {\"effort\": \"none\"}, \"max_output_tokens\": 3, \"temperature\": 0}");
    }

    @Test
    void everyResponseObjectValidates() throws Exception {
        for (String body : bodies()) {
            JsonNode r = JSON.readTree(ok(http().body(body).post("/v1/responses")));
            OpenResponsesSchema.assertResponse(r);
            OpenResponsesSchema.assertResponse(JSON.readTree(http().get("/v1/responses/" + r.get("id").asText()).then().statusCode(200).extract().asString()));
        }
        JsonNode cut = JSON.readTree(http().body(bodies().get(3)).post("/v1/responses").asString());
        assertEquals("incomplete", cut.get("status").asText());
        JsonNode last = cut.get("output").get(cut.get("output").size() - 1);
        assertEquals("incomplete", last.get("status").asText(), "the message cut off by max_output_tokens is incomplete: " + cut);
        assertEquals(3, cut.get("max_output_tokens").asInt());
        JsonNode plain = JSON.readTree(http().body("{\"input\": \"What is 2 + 2?\"}").post("/v1/responses").asString());
        assertTrue(plain.get("max_output_tokens").asInt() > 1000, "with none given, the limit is what the context leaves: " + plain.get("max_output_tokens"));
        assertTrue(plain.get("completed_at").asLong() >= plain.get("created_at").asLong());
    }

    /** The frames of an SSE stream: each event's JSON (its event name checked against its type), and whether [DONE] ended it. */
    static List<JsonNode> events(String sse) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        String[] frames = sse.split("\n\n");
        for (int i = 0; i < frames.length; i++) {
            String f = frames[i].strip();
            if (f.isEmpty()) {
                continue;
            }
            if (f.equals("data: [DONE]")) {
                assertEquals(frames.length - 1, i, "[DONE] is the last frame");
                return out;
            }
            String name = null;
            String data = null;
            for (String line : f.split("\n")) {
                if (line.startsWith("event: ")) {
                    name = line.substring(7);
                } else if (line.startsWith("data: ")) {
                    data = line.substring(6);
                }
            }
            JsonNode e = JSON.readTree(data);
            assertEquals(e.get("type").asText(), name, "the SSE event name is the event's type");
            out.add(e);
        }
        throw new AssertionError("the stream did not end with [DONE]: " + sse);
    }

    /** An event as the specification names it (see the class comment). */
    static JsonNode specNamed(JsonNode e) {
        String type = e.get("type").asText();
        if (type.startsWith("response.reasoning_text.")) {
            ObjectNode copy = e.deepCopy();
            copy.put("type", "response.reasoning." + type.substring("response.reasoning_text.".length()));
            return copy;
        }
        return e;
    }

    @Test
    void everyStreamedEventValidates() throws Exception {
        for (String body : bodies()) {
            ObjectNode b = (ObjectNode) JSON.readTree(body);
            b.put("stream", true);
            String sse = ok(http().body(b.toString()).post("/v1/responses"));
            List<JsonNode> events = events(sse);
            for (int i = 0; i < events.size(); i++) {
                assertEquals(i, events.get(i).get("sequence_number").asInt());
                OpenResponsesSchema.assertEvent(specNamed(events.get(i)));
            }
            String lastType = events.getLast().get("type").asText();
            assertTrue(lastType.equals("response.completed") || lastType.equals("response.incomplete"), lastType);
        }
    }

    @Test
    void errorsCarryStringCodes() throws Exception {
        Response r = http().body("{\"input\": \"x\", \"temperature\": \"hot\"}").post("/v1/responses");
        assertEquals(400, r.statusCode());
        JsonNode e = JSON.readTree(r.asString()).get("error");
        assertTrue(e.get("code").isTextual(), r.asString());
        assertEquals("temperature", e.get("param").asText());
    }

    /** A Codex-shaped first request: instructions, a developer item after the user's, a namespace of tools and a custom tool. */
    static ObjectNode codexBody() throws Exception {
        ObjectNode b = JSON.createObjectNode();
        b.put("model", "spindle-chat-target").put("instructions", "You are a coding agent.").put("store", false).put("stream", false)
                .put("parallel_tool_calls", false).put("prompt_cache_key", "thread-1").put("service_tier", "auto").put("max_output_tokens", 300)
                .put("temperature", 0);
        b.putArray("include").add("reasoning.encrypted_content");
        b.putObject("reasoning").put("effort", "medium").put("summary", "auto");
        b.putObject("text").put("verbosity", "low");
        b.putObject("client_metadata").put("x-codex-installation-id", "test");
        ArrayNode input = b.putArray("input");
        input.addObject().put("type", "message").put("role", "user").putArray("content").addObject().put("type", "input_text").put("text", "<environment_context>cwd: /tmp</environment_context>");
        input.addObject().put("type", "message").put("role", "developer").putArray("content").addObject().put("type", "input_text").put("text", "Sandbox: workspace-write.");
        input.addObject().put("type", "message").put("role", "user").putArray("content").addObject().put("type", "input_text").put("text", "What's the weather in Madrid?");
        ArrayNode tools = b.putArray("tools");
        ObjectNode ns = tools.addObject().put("type", "namespace").put("name", "mcp__weather__").put("description", "Tools in the mcp__weather__ namespace.");
        ObjectNode fn = (ObjectNode) JSON.readTree(WEATHER);
        fn.put("strict", false);
        ns.putArray("tools").add(fn);
        ObjectNode custom = tools.addObject().put("type", "custom").put("name", "apply_patch").put("description", "Edit files with a patch.");
        custom.putObject("format").put("type", "grammar").put("syntax", "lark").put("definition", """
                start: begin hunk end
                begin: "*** Begin Patch" LF
                end: "*** End Patch" LF?
                hunk: "*** Add File: " path LF line~1..2
                path: /[a-z]{1,8}\\.txt/
                line: "+" /[a-z ]{0,16}/ LF
                %import common.LF
                """);
        tools.addObject().put("type", "web_search");
        return b;
    }

    @Test
    void codexRequestsAreServedWithTheItemsCodexReads() throws Exception {
        JsonNode first = JSON.readTree(ok(http().body(codexBody().toString()).post("/v1/responses")));
        assertTrue(first.path("warnings").toString().contains("web_search"), "a hosted tool is left out with a warning: " + first);
        assertEquals("thread-1", first.path("prompt_cache_key").asText());
        // the model's call of the namespace's tool, as Codex sends it back (ids dropped), and its output
        ObjectNode call = JSON.createObjectNode().put("type", "function_call").put("name", "get_weather").put("namespace", "mcp__weather__")
                .put("arguments", "{\"city\": \"Madrid\"}").put("call_id", "call_1");
        // the call and its output sent back (as Codex does, ids dropped): the model answers
        ObjectNode follow = codexBody();
        ArrayNode input = follow.withArray("input");
        input.add(call);
        input.addObject().put("type", "function_call_output").put("call_id", call.get("call_id").asText())
                .put("output", "{\"city\": \"Madrid\", \"temperature\": 21, \"unit\": \"\\u00b0C\", \"condition\": \"sunny\"}");
        JsonNode answer = JSON.readTree(ok(http().body(follow.toString()).post("/v1/responses")));
        String text = "";
        for (JsonNode item : answer.get("output")) {
            if (item.get("type").asText().equals("message")) {
                text += item.get("content").get(0).get("text").asText();
            }
        }
        assertFalse(text.isBlank(), "the model answers after the namespaced call's output: " + answer); // its words are the toy model's
        String prompt = JSON.readTree(ok(http().body("{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c\","
                + " \"type\": \"function\", \"function\": {\"name\": \"mcp__weather__get_weather\", \"arguments\": \"{}\"}}]}]}").post("/tokenize"))).path("prompt").asText();
        assertTrue(prompt.contains("<function=mcp__weather__get_weather>"), "a namespaced call renders under the name the model was offered: " + prompt);
    }

    @Test
    void aCustomToolCallCarriesGrammaticalInputAndGoesBack() throws Exception {
        ObjectNode body = codexBody();
        body.put("tool_choice", "required");
        body.withArray("tools").remove(0); // only apply_patch
        body.withArray("input").addObject().put("type", "message").put("role", "user").putArray("content").addObject()
                .put("type", "input_text").put("text", "Add a file notes.txt that says hello.");
        ObjectNode streamed = body.deepCopy();
        streamed.put("stream", true);
        List<JsonNode> events = events(ok(http().body(streamed.toString()).post("/v1/responses")));
        JsonNode call = null;
        String deltas = "";
        for (JsonNode e : events) {
            if (e.get("type").asText().equals("response.custom_tool_call_input.delta")) {
                deltas += e.get("delta").asText();
            }
            if (e.get("type").asText().equals("response.output_item.done") && e.get("item").get("type").asText().equals("custom_tool_call")) {
                call = e.get("item");
            }
        }
        assertNotNull(call, events.toString());
        assertEquals("apply_patch", call.get("name").asText());
        String patch = call.get("input").asText();
        assertEquals(patch, deltas, "the input deltas add up to the input");
        assertTrue(patch.matches("(?s)\\*\\*\\* Begin Patch\n\\*\\*\\* Add File: [a-z]{1,8}\\.txt\n(\\+[a-z ]{0,16}\n){1,2}\\*\\*\\* End Patch\n?"),
                "the input follows the tool's Lark grammar: " + call + " " + events.getLast());
        assertFalse(call.has("arguments"), call.toString());

        ObjectNode follow = codexBody();
        ObjectNode back = call.deepCopy();
        back.remove("id");
        follow.withArray("input").add(back);
        follow.withArray("input").addObject().put("type", "custom_tool_call_output").put("call_id", call.get("call_id").asText()).put("output", "Done.");
        ok(http().body(follow.toString()).post("/v1/responses"));
    }

    @Test
    void unreadableGrammarsAndToolsAreNamed() throws Exception {
        ObjectNode body = codexBody();
        ((ObjectNode) body.withArray("tools").get(1).get("format")).put("definition", "start: a\na: \"x\" a\n");
        Response r = http().body(body.toString()).post("/v1/responses");
        assertEquals(400, r.statusCode());
        assertTrue(r.asString().contains("recursive") && r.asString().contains("tools[1].format.definition"), r.asString());
        body = codexBody();
        body.withArray("tools").addObject().put("type", "teleport").put("name", "x");
        r = http().body(body.toString()).post("/v1/responses");
        assertEquals(400, r.statusCode());
        assertTrue(r.asString().contains("tools[3].type"), r.asString());
    }
}

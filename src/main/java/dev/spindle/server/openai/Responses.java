package dev.spindle.server.openai;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.sample.SamplingParams;
import dev.spindle.server.ModelService;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChatRequest;
import dev.spindle.server.pipeline.Fields;
import dev.spindle.server.pipeline.ReplyStep;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Function;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * OpenAI's Responses API: {@code POST /v1/responses} (stateless, or continuing a stored
 * response through {@code previous_response_id}), {@code GET} and {@code DELETE /v1/responses/{id}}.
 * The request is translated ({@link ResponsesRequest}) into the chat pipeline's form and the
 * reply rendered from its steps ({@link ResponseWriter}); stored responses live in the
 * {@link ResponseStore}.
 */
@ApplicationScoped
public class Responses {
    private final ModelService service;
    private final ChatPipeline pipeline;
    private final ResponseStore store;

    public Responses(ModelService service, ChatPipeline pipeline, ResponseStore store) {
        this.service = service;
        this.pipeline = pipeline;
        this.store = store;
    }

    /** A request made ready: the chat pipeline's preparation and what the response echoes. */
    public record Prepared(String id, long created, ResponsesRequest request, ChatRequest chat, JsonNode body, boolean stream) {
    }

    public Prepared prepare(JsonNode body) {
        return prepare(body, id -> null);
    }

    /**
     * @param connection the conversations of responses this connection made (the WebSocket transport keeps
     *                   its last one, stored or not), consulted where the store has none
     */
    public Prepared prepare(JsonNode body, Function<String, ArrayNode> connection) {
        ResponsesRequest request = translate(body, connection);
        ChatRequest p;
        try {
            p = pipeline.prepare(request.chatBody());
        } catch (ApiException e) {
            if (!"messages".equals(e.param)) {
                throw e;
            }
            throw new ApiException(e.status, e.getMessage(), "input", e.errorCode); // the conversation is this API's input
        }
        return new Prepared("resp_" + UUID.randomUUID().toString().replace("-", ""), System.currentTimeMillis() / 1000, request, p, body,
                Fields.bool(body, "stream", false));
    }

    /** The request in the chat pipeline's form, after the stored conversation previous_response_id names. */
    ResponsesRequest translate(JsonNode body) {
        return translate(body, id -> null);
    }

    private ResponsesRequest translate(JsonNode body, Function<String, ArrayNode> connection) {
        ArrayNode previous = null;
        String prevId = Fields.string(body, "previous_response_id", null);
        ArrayNode kept = prevId == null ? null : connection.apply(prevId);
        if (kept != null) {
            previous = kept.deepCopy();
        } else if (prevId != null) {
            ResponseStore.Entry e = store.get(prevId);
            if (e == null || !"response".equals(e.response().path("object").asText())) {
                throw new ApiException(404, "no stored response '" + prevId + "' (unknown, expired, or stored with store=false); this server keeps "
                        + "responses in memory for spindle.responses.store-ttl", "previous_response_id");
            }
            previous = e.messages().deepCopy();
            previous.addAll(messagesOf(e.response().path("output")));
        }
        return ResponsesRequest.parse(body, previous);
    }

    /** A response's output items as the chat messages a follow-up renders (read as the same items sent back as input would be). */
    static ArrayNode messagesOf(JsonNode output) {
        ArrayNode out = JSON.createArrayNode();
        ResponsesRequest.items(output, out);
        return out;
    }

    /** The response object, in progress (no output yet) or final. */
    private ObjectNode response(Prepared p, String status, ArrayNode output, ReplyStep last) {
        JsonNode b = p.body();
        SamplingParams params = p.chat().gen().params();
        ObjectNode r = JSON.createObjectNode();
        r.put("id", p.id()).put("object", "response").put("created_at", p.created());
        if (status.equals("completed")) {
            r.put("completed_at", System.currentTimeMillis() / 1000);
        } else {
            r.putNull("completed_at");
        }
        r.put("status", status);
        r.putNull("error");
        if ("incomplete".equals(status)) {
            r.putObject("incomplete_details").put("reason", "max_output_tokens");
        } else {
            r.putNull("incomplete_details");
        }
        r.set("instructions", echo(b, "instructions"));
        r.put("model", service.servedName());
        r.set("output", output);
        r.put("parallel_tool_calls", b.path("parallel_tool_calls").asBoolean(true));
        r.set("previous_response_id", echo(b, "previous_response_id"));
        r.set("tool_choice", b.hasNonNull("tool_choice") ? b.get("tool_choice") : JSON.getNodeFactory().textNode("auto"));
        r.set("tools", p.request().echoedTools());
        r.put("temperature", params.temperature());
        r.put("top_p", params.topP());
        r.put("presence_penalty", params.presencePenalty());
        r.put("frequency_penalty", params.frequencyPenalty());
        r.put("top_logprobs", 0);
        r.put("max_output_tokens", params.maxTokens()); // the limit that applied: the request's, or what the context left
        r.set("max_tool_calls", echo(b, "max_tool_calls"));
        ObjectNode reasoning = r.putObject("reasoning");
        String effort = b.path("reasoning").path("effort").asText(null);
        reasoning.set("effort", effort == null ? JSON.nullNode() : JSON.getNodeFactory().textNode(effort.equals("minimal") ? "none" : effort));
        reasoning.set("summary", b.path("reasoning").hasNonNull("summary") ? b.path("reasoning").get("summary") : JSON.nullNode());
        ObjectNode text = r.putObject("text");
        text.set("format", echoedFormat(b.path("text").get("format")));
        if (b.path("text").hasNonNull("verbosity")) {
            text.set("verbosity", b.path("text").get("verbosity"));
        }
        r.put("truncation", "disabled");
        r.put("store", p.request().store() && store.enabled());
        r.put("background", false);
        r.put("service_tier", b.hasNonNull("service_tier") && !b.get("service_tier").asText().equals("auto") ? b.get("service_tier").asText() : "default");
        r.set("user", echo(b, "user"));
        r.set("safety_identifier", echo(b, "safety_identifier"));
        r.set("prompt_cache_key", echo(b, "prompt_cache_key"));
        r.set("metadata", b.hasNonNull("metadata") ? b.get("metadata") : JSON.createObjectNode());
        if (!p.request().warnings().isEmpty()) {
            ArrayNode w = r.putArray("warnings");
            p.request().warnings().forEach(w::add);
        }
        if (last != null) {
            ObjectNode u = r.putObject("usage");
            u.put("input_tokens", p.chat().prompt().length);
            u.putObject("input_tokens_details").put("cached_tokens", last.cachedTokens());
            u.put("output_tokens", last.completionTokens());
            u.putObject("output_tokens_details").put("reasoning_tokens", last.reasoningTokens());
            u.put("total_tokens", p.chat().prompt().length + last.completionTokens());
        } else {
            r.putNull("usage");
        }
        return r;
    }

    /** text.format as echoed: as given, a json_schema format with its name, description and strict present. */
    private static JsonNode echoedFormat(JsonNode format) {
        if (format == null || format.isNull()) {
            return JSON.createObjectNode().put("type", "text");
        }
        ObjectNode f = ((ObjectNode) format).deepCopy();
        if ("json_schema".equals(f.path("type").asText())) {
            if (!f.has("name")) {
                f.put("name", "response");
            }
            if (!f.has("description")) {
                f.putNull("description");
            }
            if (!f.has("strict")) {
                f.put("strict", false);
            }
        }
        return f;
    }

    /** A request field echoed as given, or null. */
    private static JsonNode echo(JsonNode body, String field) {
        return body.hasNonNull(field) ? body.get(field) : JSON.nullNode();
    }

    private static String status(ReplyStep last) {
        return "length".equals(last.finishReason()) ? "incomplete" : "completed";
    }

    private void remember(Prepared p, ObjectNode response) {
        if (p.request().store()) {
            store.put(p.id(), response, p.request().messages());
        }
    }

    /** The whole response at once. */
    public Uni<ObjectNode> complete(Prepared p) {
        return pipeline.collect(p.chat()).map(list -> {
            ChatPipeline.Collected c = list.getFirst();
            ResponseWriter w = new ResponseWriter(p.request().encryptedReasoning(), p.request().tools());
            c.steps().forEach(step -> w.step(step.delta())); // step by step, as a stream would: the same items in the same order
            w.finish(status(c.last()).equals("incomplete"));
            ObjectNode r = response(p, status(c.last()), w.output(), c.last());
            remember(p, r);
            return r;
        });
    }

    /**
     * A warm-up over the WebSocket transport ({@code generate: false}): the request is checked and its
     * conversation kept, nothing is generated; the events say so ({@code response.created}, then
     * {@code response.completed} with no output).
     */
    List<ObjectNode> warmUp(Prepared p) {
        ResponseWriter w = new ResponseWriter(false, p.request().tools());
        ObjectNode created = response(p, "in_progress", JSON.createArrayNode(), null);
        ObjectNode done = response(p, "completed", JSON.createArrayNode(), null);
        ObjectNode u = done.putObject("usage");
        u.put("input_tokens", 0).putObject("input_tokens_details").put("cached_tokens", 0);
        u.put("output_tokens", 0).putObject("output_tokens_details").put("reasoning_tokens", 0);
        u.put("total_tokens", 0);
        List<ObjectNode> out = new ArrayList<>();
        for (var e : List.of(Map.entry("response.created", created), Map.entry("response.completed", done))) {
            String frame = w.event(e.getKey(), wrap(e.getValue()));
            try {
                out.add((ObjectNode) JSON.readTree(frame.substring(frame.indexOf("data: ") + 6)));
            } catch (JsonProcessingException ex) {
                throw new IllegalStateException(ex);
            }
        }
        return out;
    }

    /** The typed event stream. */
    public Multi<String> stream(Prepared p) {
        ResponseWriter w = new ResponseWriter(p.request().encryptedReasoning(), p.request().tools());
        ObjectNode initial = response(p, "in_progress", JSON.createArrayNode(), null);
        List<String> head = new ArrayList<>();
        head.add(w.event("response.created", wrap(initial)));
        head.add(w.event("response.in_progress", wrap(initial)));
        w.drain();
        Multi<ReplyStep> steps = pipeline.run(p.chat()).getFirst();
        ReplyStep[] last = {null};
        Multi<String> body = steps.onItem().transformToMultiAndConcatenate(step -> {
            last[0] = step;
            w.step(step.delta());
            if (step.last()) {
                w.finish(status(step).equals("incomplete"));
                ObjectNode r = response(p, status(step), w.output().deepCopy(), step);
                remember(p, r);
                w.event("incomplete".equals(r.get("status").asText()) ? "response.incomplete" : "response.completed", wrap(r));
                return Multi.createFrom().iterable(done(w.drain()));
            }
            return Multi.createFrom().iterable(w.drain());
        }).onFailure().recoverWithMulti(err -> {
            ObjectNode r = response(p, "failed", w.output().deepCopy(), last[0]);
            r.putObject("error").put("code", "server_error").put("message", String.valueOf(err.getMessage()));
            w.event("response.failed", wrap(r));
            return Multi.createFrom().iterable(done(w.drain()));
        });
        return Multi.createBy().concatenating().streams(Multi.createFrom().iterable(head), body);
    }

    /** The stream's last frames, then {@code [DONE]} (the Open Responses specification ends every stream so; the OpenAI SDKs and Codex accept it). */
    private static List<String> done(List<String> frames) {
        List<String> out = new ArrayList<>(frames);
        out.add("data: [DONE]\n\n");
        return out;
    }

    private static ObjectNode wrap(ObjectNode response) {
        ObjectNode o = JSON.createObjectNode();
        o.set("response", response);
        return o;
    }

    /** GET /v1/responses/{id}. */
    public ObjectNode get(String id) {
        ResponseStore.Entry e = store.get(id);
        if (e == null || !"response".equals(e.response().path("object").asText())) { // the store holds message threads too
            throw new ApiException(404, "no stored response '" + id + "'", "response_id");
        }
        return e.response();
    }

    /** DELETE /v1/responses/{id}. */
    public ObjectNode delete(String id) {
        if (!store.remove(id)) {
            throw new ApiException(404, "no stored response '" + id + "'", "response_id");
        }
        return JSON.createObjectNode().put("id", id).put("object", "response.deleted").put("deleted", true);
    }
}

package dev.spindle.server.anthropic;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.ModelService;
import dev.spindle.server.openai.ResponseStore;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChatRequest;
import dev.spindle.server.pipeline.Fields;
import dev.spindle.server.pipeline.ReplyStep;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * Anthropic's Messages API: {@code POST /v1/messages} (whole or streamed) and
 * {@code POST /v1/messages/count_tokens}, translated into the chat pipeline ({@link MessagesRequest})
 * and rendered from its steps ({@link MessageWriter}). Stop reasons: {@code end_turn},
 * {@code max_tokens}, {@code stop_sequence}, {@code tool_use}.
 */
@ApplicationScoped
public class Messages {
    private final ModelService service;
    private final ChatPipeline pipeline;
    private final ResponseStore store;

    public Messages(ModelService service, ChatPipeline pipeline, ResponseStore store) {
        this.service = service;
        this.pipeline = pipeline;
        this.store = store;
    }

    /**
     * A request made ready.
     *
     * @param contextEdits the context edits applied ({@code applied_edits}), or null when none was asked for
     * @param thread       the request's whole conversation with its system prompt and tools, kept for the next turn
     *                     of its message thread; null when the request is not on one
     */
    public record Prepared(String id, ChatRequest chat, boolean stream, ArrayNode contextEdits, ObjectNode thread) {
    }

    public Prepared prepare(JsonNode body) {
        ObjectNode thread = MessageThreads.resolve(body, store);
        if (thread != null) {
            body = thread.get("request");
        }
        ContextEdits edits = ContextEdits.parse(body.get("context_management"));
        ObjectNode chatBody = MessagesRequest.parse(body, false); // every field checked before anything is rendered
        ArrayNode applied = null;
        if (!edits.isEmpty()) {
            ContextEdits.Result r = edits.apply(body, b -> pipeline.promptTokens(MessagesRequest.parse(b, true)));
            body = r.body();
            applied = r.applied();
            chatBody = MessagesRequest.parse(body, false);
        }
        return new Prepared("msg_" + UUID.randomUUID().toString().replace("-", ""), pipeline.prepare(chatBody), Fields.bool(body, "stream", false), applied,
                thread);
    }

    /**
     * POST /v1/messages/count_tokens: the prompt's tokens as /v1/messages would render it (after its
     * context edits, with the count before them as {@code context_management.original_input_tokens}).
     */
    public ObjectNode countTokens(JsonNode body) {
        ContextEdits edits = ContextEdits.parse(body.get("context_management"));
        ObjectNode out = JSON.createObjectNode();
        if (edits.isEmpty()) {
            return out.put("input_tokens", pipeline.promptTokens(MessagesRequest.parse(body, true)));
        }
        ContextEdits.Result r = edits.apply(body, b -> pipeline.promptTokens(MessagesRequest.parse(b, true)));
        out.put("input_tokens", pipeline.promptTokens(MessagesRequest.parse(r.body(), true)));
        out.putObject("context_management").put("original_input_tokens", r.originalTokens());
        return out;
    }

    /** The response's context_management report, where edits were asked for. */
    private static void contextManagement(Prepared p, ObjectNode into) {
        if (p.contextEdits() != null) {
            into.putObject("context_management").set("applied_edits", p.contextEdits().deepCopy());
        }
    }

    private static String stopReason(ReplyStep last) {
        return switch (last.finishReason() == null ? "stop" : last.finishReason()) {
            case "length" -> "max_tokens";
            case "tool_calls" -> "tool_use";
            default -> last.stopReason() instanceof String ? "stop_sequence" : "end_turn";
        };
    }

    private ObjectNode usage(Prepared p, ReplyStep last) {
        ObjectNode u = JSON.createObjectNode();
        int cached = last == null ? 0 : last.cachedTokens();
        u.put("input_tokens", p.chat().prompt().length - cached);
        u.put("cache_creation_input_tokens", 0).put("cache_read_input_tokens", cached);
        u.put("output_tokens", last == null ? 0 : last.completionTokens());
        return u;
    }

    private ObjectNode message(Prepared p, MessageWriter w, ReplyStep last) {
        ObjectNode m = JSON.createObjectNode();
        m.put("id", p.id()).put("type", "message").put("role", "assistant").put("model", service.servedName());
        m.set("content", w.content().deepCopy());
        if (last == null) {
            m.putNull("stop_reason");
            m.putNull("stop_sequence");
        } else {
            m.put("stop_reason", stopReason(last));
            if (last.stopReason() instanceof String s) {
                m.put("stop_sequence", s);
            } else {
                m.putNull("stop_sequence");
            }
        }
        m.set("usage", usage(p, last));
        if (last != null) {
            contextManagement(p, m);
        }
        return m;
    }

    public Uni<ObjectNode> complete(Prepared p) {
        return pipeline.collect(p.chat()).map(list -> {
            ChatPipeline.Collected c = list.getFirst();
            MessageWriter w = new MessageWriter();
            c.steps().forEach(step -> w.step(step.delta())); // step by step, as a stream would: the same items in the same order
            w.close();
            MessageThreads.keep(p.thread(), p.id(), w.content(), store);
            return message(p, w, c.last());
        });
    }

    public Multi<String> stream(Prepared p) {
        MessageWriter w = new MessageWriter();
        List<String> head = new ArrayList<>();
        ObjectNode start = JSON.createObjectNode();
        start.set("message", message(p, w, null));
        head.add(MessageWriter.frame("message_start", start));
        head.add(MessageWriter.frame("ping", JSON.createObjectNode()));
        Multi<String> body = pipeline.run(p.chat()).getFirst().onItem().transformToMultiAndConcatenate(step -> {
            w.step(step.delta());
            if (step.last()) {
                w.close();
                ObjectNode delta = JSON.createObjectNode();
                ObjectNode d = delta.putObject("delta").put("stop_reason", stopReason(step));
                if (step.stopReason() instanceof String s) {
                    d.put("stop_sequence", s);
                } else {
                    d.putNull("stop_sequence");
                }
                delta.set("usage", usage(p, step));
                contextManagement(p, delta);
                w.event("message_delta", delta);
                w.event("message_stop", JSON.createObjectNode());
                MessageThreads.keep(p.thread(), p.id(), w.content(), store);
            }
            return Multi.createFrom().iterable(w.drain());
        }).onFailure().recoverWithMulti(err -> {
            ObjectNode e = JSON.createObjectNode();
            e.putObject("error").put("type", "api_error").put("message", String.valueOf(err.getMessage()));
            return Multi.createFrom().item(MessageWriter.frame("error", e));
        });
        return Multi.createBy().concatenating().streams(Multi.createFrom().iterable(head), body);
    }
}

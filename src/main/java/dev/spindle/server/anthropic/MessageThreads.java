package dev.spindle.server.anthropic;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.openai.ResponseStore;
import dev.spindle.server.pipeline.ApiException;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * Anthropic's message threads ({@code thread}: the server holds the conversation between turns, so
 * each request sends only its new messages; the Anthropic SDK's tool runner and {@code messages.thread()}
 * use them). {@code {"type": "create"}} keeps the request's conversation, its system prompt and tools,
 * and the reply, under the reply's id; {@code {"type": "continue", "previous_message_id": ...}} renders
 * that conversation, then the request's messages (its system prompt and tools those the thread was
 * created with, unless it gives its own), and keeps the longer conversation under the new reply's id.
 * Threads live in the Responses API's store (bounded in count and age, in memory); one unknown or
 * expired is a 404 whose {@code error.details.error_code} is {@code thread_not_found}, on which the SDK
 * sends the whole conversation again.
 */
final class MessageThreads {
    private MessageThreads() {
    }

    /**
     * The request as the turn renders it, with what the thread keeps ({@code request}: the body with the
     * whole conversation), or null when the request is on no thread.
     */
    static ObjectNode resolve(JsonNode body, ResponseStore store) {
        JsonNode thread = body.get("thread");
        if (thread == null || thread.isNull()) {
            return null;
        }
        if (!thread.isObject()) {
            throw ApiException.badRequest("thread must be {\"type\": \"create\"} or {\"type\": \"continue\", \"previous_message_id\": ...}", "thread");
        }
        ObjectNode request = ((ObjectNode) body).deepCopy();
        request.remove("thread");
        String type = thread.path("type").asText("");
        switch (type) {
            case "create" -> {
            }
            case "continue" -> {
                JsonNode id = thread.get("previous_message_id");
                if (id == null || !id.isTextual() || id.asText().isEmpty()) {
                    throw ApiException.badRequest("thread.previous_message_id: field required (the id of the thread's last reply)", "thread.previous_message_id");
                }
                ResponseStore.Entry e = store.get(id.asText());
                if (e == null || !e.response().path("thread").asBoolean(false)) {
                    throw new ApiException(404, "no message thread continues from '" + id.asText() + "' (unknown or expired: this server keeps threads in "
                            + "memory, as it keeps responses, for spindle.responses.store-ttl)", "thread.previous_message_id", "thread_not_found");
                }
                ArrayNode messages = e.messages().deepCopy();
                JsonNode given = request.get("messages");
                if (given != null && !given.isArray()) {
                    throw ApiException.badRequest("messages: a list of messages was expected", "messages");
                }
                if (given != null) {
                    messages.addAll((ArrayNode) given);
                }
                request.set("messages", messages);
                for (String f : new String[]{"system", "tools"}) {
                    if (!request.has(f) && e.response().hasNonNull(f)) {
                        request.set(f, e.response().get(f));
                    }
                }
            }
            default -> throw ApiException.badRequest("thread.type must be 'create' or 'continue'; got " + thread.get("type"), "thread.type");
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("request", request);
        return out;
    }

    /** After a threaded turn's reply: its conversation, the reply included, kept under the reply's id. */
    static void keep(ObjectNode thread, String replyId, ArrayNode replyContent, ResponseStore store) {
        if (thread == null) {
            return;
        }
        JsonNode request = thread.get("request");
        ArrayNode messages = request.path("messages").deepCopy();
        ObjectNode reply = messages.addObject().put("role", "assistant");
        reply.set("content", replyContent.deepCopy());
        ObjectNode kept = JSON.createObjectNode().put("thread", true);
        for (String f : new String[]{"system", "tools"}) {
            if (request.hasNonNull(f)) {
                kept.set(f, request.get(f));
            }
        }
        store.put(replyId, kept, messages);
    }
}

package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolCallDelta;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.UUID;

import static dev.spindle.server.openai.ChatCompletions.JSON;

/**
 * Builds a Responses API reply from the pipeline's steps: the output items (reasoning, message,
 * function calls, in the order the model writes them) and, for a streamed reply, the typed event
 * sequence ({@code response.output_item.added}, {@code response.content_part.added},
 * {@code response.output_text.delta}, {@code response.reasoning_text.delta} and its summary twin,
 * {@code response.function_call_arguments.delta}/{@code .done}, {@code response.output_item.done},
 * ...) with sequence numbers. The same writer makes the non-streamed object, so items and ids are
 * those the stream announced.
 */
final class ResponseWriter {
    private final List<String> events = new ArrayList<>();
    private final ArrayNode output = JSON.createArrayNode();
    private final boolean encryptedReasoning;
    private int sequence;
    private ObjectNode open;          // the item being written, or null
    private int openCall = -1;        // the index of the call being written, or -1
    private boolean callReleased;     // whether the open call was completed (else it was cut off: its item is incomplete)
    private final StringBuilder text = new StringBuilder();
    private final StringBuilder summary = new StringBuilder();

    ResponseWriter(boolean encryptedReasoning) {
        this.encryptedReasoning = encryptedReasoning;
    }

    /** An event with its sequence number, as an SSE frame (named and typed). */
    String event(String type, ObjectNode body) {
        ObjectNode e = JSON.createObjectNode().put("type", type);
        e.setAll(body);
        e.put("sequence_number", sequence++);
        String frame = "event: " + type + "\ndata: " + e + "\n\n";
        events.add(frame);
        return frame;
    }

    /** The frames written since the last call. */
    List<String> drain() {
        List<String> out = new ArrayList<>(events);
        events.clear();
        return out;
    }

    ArrayNode output() {
        return output;
    }

    /**
     * Feeds one step of the reply. The pieces and the end of the call being written come first: in a
     * step, text only follows a call that it ends (a broken or cut-off call), and comes before new calls.
     */
    void step(ParsedDelta d) {
        List<ToolCallDelta> later = new ArrayList<>();
        for (ToolCallDelta c : d.callDeltas()) {
            if (!c.opens() && c.index() == openCall) {
                call(c);
            } else {
                later.add(c);
            }
        }
        for (ToolCall c : d.toolCalls()) {
            if (c.index() == openCall) {
                callDone(c);
            }
        }
        if (!d.reasoning().isEmpty()) {
            reasoning(d.reasoning());
        }
        if (!d.content().isEmpty()) {
            text(d.content());
        }
        for (ToolCallDelta c : later) {
            call(c);
        }
        for (ToolCall c : d.toolCalls()) {
            callDone(c);
        }
    }

    private int index() {
        return output.size() - 1;
    }

    private ObjectNode at() {
        return JSON.createObjectNode().put("item_id", open.get("id").asText()).put("output_index", index());
    }

    private void reasoning(String delta) {
        if (open == null || !open.path("type").asText().equals("reasoning")) {
            close();
            open = output.addObject().put("id", "rs_" + uid()).put("type", "reasoning");
            open.putArray("summary");
            open.putArray("content");
            text.setLength(0);
            summary.setLength(0);
            ObjectNode added = JSON.createObjectNode().put("output_index", index());
            added.set("item", open.deepCopy());
            event("response.output_item.added", added);
            ObjectNode part = at().put("content_index", 0);
            part.putObject("part").put("type", "reasoning_text").put("text", "");
            event("response.content_part.added", part);
            ObjectNode sp = at().put("summary_index", 0);
            sp.putObject("part").put("type", "summary_text").put("text", "");
            event("response.reasoning_summary_part.added", sp);
        }
        text.append(delta);
        event("response.reasoning_text.delta", at().put("content_index", 0).put("delta", delta));
        event("response.reasoning_summary_text.delta", at().put("summary_index", 0).put("delta", delta));
    }

    private void text(String delta) {
        if (open == null || !open.path("type").asText().equals("message")) {
            close();
            open = output.addObject().put("id", "msg_" + uid()).put("type", "message").put("status", "in_progress").put("role", "assistant");
            open.putArray("content");
            text.setLength(0);
            ObjectNode added = JSON.createObjectNode().put("output_index", index());
            added.set("item", open.deepCopy());
            event("response.output_item.added", added);
            ObjectNode part = at().put("content_index", 0);
            ObjectNode p = part.putObject("part").put("type", "output_text").put("text", "");
            p.putArray("annotations");
            p.putArray("logprobs");
            event("response.content_part.added", part);
        }
        text.append(delta);
        ObjectNode d = at().put("content_index", 0).put("delta", delta);
        d.putArray("logprobs");
        event("response.output_text.delta", d);
    }

    private void call(ToolCallDelta c) {
        if (c.opens()) {
            close();
            open = output.addObject().put("id", "fc_" + uid()).put("type", "function_call").put("status", "in_progress")
                    .put("call_id", c.id()).put("name", c.name()).put("arguments", "");
            openCall = c.index();
            text.setLength(0);
            ObjectNode added = JSON.createObjectNode().put("output_index", index());
            added.set("item", open.deepCopy());
            event("response.output_item.added", added);
        }
        if (!c.arguments().isEmpty() && open != null && open.path("type").asText().equals("function_call")) {
            text.append(c.arguments());
            event("response.function_call_arguments.delta", at().put("delta", c.arguments()));
        }
    }

    private void callDone(ToolCall c) {
        if (open != null && open.path("type").asText().equals("function_call") && open.path("call_id").asText().equals(c.id())) {
            open.put("arguments", c.arguments());
            callReleased = true;
            close();
        }
    }

    /** Ends the item being written with its .done events. */
    void close() {
        close(false);
    }

    /**
     * Ends the reply: the item being written is closed, as {@code incomplete} when the reply was cut off
     * (max_output_tokens) and {@code completed} otherwise.
     */
    void finish(boolean cutOff) {
        close(cutOff);
    }

    private void close(boolean cutOff) {
        if (open == null) {
            return;
        }
        String type = open.path("type").asText();
        String all = text.toString();
        switch (type) {
            case "reasoning" -> {
                ObjectNode part = JSON.createObjectNode().put("type", "reasoning_text").put("text", all);
                ((ArrayNode) open.get("content")).add(part);
                ObjectNode summaryPart = JSON.createObjectNode().put("type", "summary_text").put("text", all);
                ((ArrayNode) open.get("summary")).add(summaryPart);
                if (encryptedReasoning) {
                    open.put("encrypted_content", ResponsesRequest.REASONING_BLOB + Base64.getEncoder().encodeToString(all.getBytes(StandardCharsets.UTF_8)));
                }
                event("response.reasoning_text.done", at().put("content_index", 0).put("text", all));
                ObjectNode cd = at().put("content_index", 0);
                cd.set("part", part);
                event("response.content_part.done", cd);
                event("response.reasoning_summary_text.done", at().put("summary_index", 0).put("text", all));
                ObjectNode sd = at().put("summary_index", 0);
                sd.set("part", summaryPart);
                event("response.reasoning_summary_part.done", sd);
            }
            case "message" -> {
                ObjectNode part = JSON.createObjectNode().put("type", "output_text").put("text", all);
                part.putArray("annotations");
                part.putArray("logprobs");
                ((ArrayNode) open.get("content")).add(part);
                open.put("status", cutOff ? "incomplete" : "completed");
                ObjectNode td = at().put("content_index", 0).put("text", all);
                td.putArray("logprobs");
                event("response.output_text.done", td);
                ObjectNode cd = at().put("content_index", 0);
                cd.set("part", part);
                event("response.content_part.done", cd);
            }
            case "function_call" -> {
                open.put("status", callReleased ? "completed" : "incomplete");
                callReleased = false;
                open.put("arguments", open.path("arguments").asText().isEmpty() ? all : open.get("arguments").asText());
                event("response.function_call_arguments.done", at().put("name", open.get("name").asText()).put("arguments", open.get("arguments").asText()));
            }
            default -> throw new IllegalStateException(type);
        }
        ObjectNode done = JSON.createObjectNode().put("output_index", index());
        done.set("item", open.deepCopy());
        event("response.output_item.done", done);
        open = null;
        openCall = -1;
        text.setLength(0);
    }

    private static String uid() {
        return UUID.randomUUID().toString().replace("-", "");
    }
}

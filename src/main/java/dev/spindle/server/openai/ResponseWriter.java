package dev.spindle.server.openai;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
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

import static dev.spindle.server.pipeline.Json.JSON;

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
    private final ResponsesTools tools;
    private int sequence;
    private ObjectNode open;          // the item being written, or null
    private int openCall = -1;        // the index of the call being written, or -1
    private boolean callReleased;     // whether the open call was completed (else it was cut off: its item is incomplete)
    private final StringBuilder text = new StringBuilder();
    private final StringBuilder summary = new StringBuilder();

    /** @param tools where each call goes back to: a function (in its namespace), a custom tool or local_shell */
    ResponseWriter(boolean encryptedReasoning, ResponsesTools tools) {
        this.encryptedReasoning = encryptedReasoning;
        this.tools = tools;
    }

    private static boolean isCall(ObjectNode item) {
        return item != null && switch (item.path("type").asText()) {
            case "function_call", "custom_tool_call", "local_shell_call" -> true;
            default -> false;
        };
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
            ResponsesTools.Origin origin = tools.origin(c.name());
            open = switch (origin.kind()) {
                case FUNCTION -> output.addObject().put("id", "fc_" + uid()).put("type", "function_call").put("status", "in_progress")
                        .put("call_id", c.id()).put("name", origin.name()).put("arguments", "");
                case CUSTOM -> output.addObject().put("id", "ctc_" + uid()).put("type", "custom_tool_call").put("status", "in_progress")
                        .put("call_id", c.id()).put("name", origin.name()).put("input", "");
                case LOCAL_SHELL -> {
                    ObjectNode item = output.addObject().put("id", "lsh_" + uid()).put("type", "local_shell_call").put("status", "in_progress")
                            .put("call_id", c.id());
                    item.set("action", shellAction(JSON.createObjectNode()));
                    yield item;
                }
            };
            if (origin.namespace() != null) {
                open.put("namespace", origin.namespace());
            }
            openCall = c.index();
            text.setLength(0);
            ObjectNode added = JSON.createObjectNode().put("output_index", index());
            added.set("item", open.deepCopy());
            event("response.output_item.added", added);
        }
        if (!c.arguments().isEmpty() && isCall(open)) {
            text.append(c.arguments());
            if (open.path("type").asText().equals("function_call")) {
                event("response.function_call_arguments.delta", at().put("delta", c.arguments()));
            } // a custom tool's input and a shell command are announced whole, when the call is complete
        }
    }

    private void callDone(ToolCall c) {
        if (isCall(open) && open.path("call_id").asText().equals(c.id())) {
            open.put("arguments", c.arguments());
            callReleased = true;
            close();
        }
    }

    /** local_shell_call's exec action from the arguments of the local_shell function the model saw. */
    private static ObjectNode shellAction(JsonNode args) {
        ObjectNode a = JSON.createObjectNode().put("type", "exec");
        a.set("command", args.path("command").isArray() ? args.get("command") : JSON.createArrayNode());
        a.set("timeout_ms", args.hasNonNull("timeout_ms") ? args.get("timeout_ms") : JSON.nullNode());
        a.set("working_directory", args.hasNonNull("workdir") ? args.get("workdir") : JSON.nullNode());
        a.putObject("env");
        a.putNull("user");
        return a;
    }

    private static JsonNode parsed(String arguments) {
        try {
            JsonNode n = JSON.readTree(arguments);
            return n == null ? JSON.createObjectNode() : n;
        } catch (JsonProcessingException e) {
            return JSON.createObjectNode(); // a call cut off mid-arguments
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
            case "custom_tool_call" -> {
                String args = open.path("arguments").asText().isEmpty() ? all : open.get("arguments").asText();
                open.remove("arguments");
                open.put("status", callReleased ? "completed" : "incomplete");
                callReleased = false;
                String input = parsed(args).path("input").asText("");
                open.put("input", input);
                event("response.custom_tool_call_input.delta", at().put("delta", input));
                event("response.custom_tool_call_input.done", at().put("input", input));
            }
            case "local_shell_call" -> {
                String args = open.path("arguments").asText().isEmpty() ? all : open.get("arguments").asText();
                open.remove("arguments");
                open.put("status", callReleased ? "completed" : "incomplete");
                callReleased = false;
                open.set("action", shellAction(parsed(args)));
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

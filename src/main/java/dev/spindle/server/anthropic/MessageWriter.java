package dev.spindle.server.anthropic;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolCallDelta;

import java.util.ArrayList;
import java.util.List;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * Builds an Anthropic message from the pipeline's steps: its content blocks ({@code thinking},
 * {@code text}, {@code tool_use}, in the order the model writes them) and, streamed, the events
 * {@code content_block_start}, {@code content_block_delta} ({@code thinking_delta},
 * {@code text_delta}, {@code input_json_delta}) and {@code content_block_stop}. The non-streamed
 * message is made by the same writer.
 */
final class MessageWriter {
    private final List<String> events = new ArrayList<>();
    private final ArrayNode content = JSON.createArrayNode();
    private ObjectNode open;
    private int openCall = -1; // the index of the call being written, or -1
    private final StringBuilder text = new StringBuilder();

    static String frame(String type, ObjectNode body) {
        ObjectNode e = JSON.createObjectNode().put("type", type);
        e.setAll(body);
        return "event: " + type + "\ndata: " + e + "\n\n";
    }

    void event(String type, ObjectNode body) {
        events.add(frame(type, body));
    }

    List<String> drain() {
        List<String> out = new ArrayList<>(events);
        events.clear();
        return out;
    }

    ArrayNode content() {
        return content;
    }

    /** Feeds one step: the pieces and end of the call being written first (see the Responses writer), then text, then new calls. */
    void step(ParsedDelta d) {
        List<ToolCallDelta> later = new ArrayList<>();
        for (ToolCallDelta c : d.callDeltas()) {
            if (!c.opens() && c.index() == openCall) {
                piece(c);
            } else {
                later.add(c);
            }
        }
        for (ToolCall c : d.toolCalls()) {
            if (c.index() == openCall) {
                close();
            }
        }
        if (!d.reasoning().isEmpty()) {
            delta("thinking", d.reasoning());
        }
        if (!d.content().isEmpty()) {
            delta("text", d.content());
        }
        for (ToolCallDelta c : later) {
            piece(c);
        }
        for (ToolCall c : d.toolCalls()) {
            if (c.index() == openCall) {
                close();
            }
        }
    }

    private void piece(ToolCallDelta c) {
        if (c.opens()) {
            close();
            open = content.addObject().put("type", "tool_use").put("id", c.id()).put("name", c.name());
            open.putObject("input");
            openCall = c.index();
            text.setLength(0);
            start();
        }
        if (!c.arguments().isEmpty() && c.index() == openCall) {
            text.append(c.arguments());
            ObjectNode body = JSON.createObjectNode().put("index", content.size() - 1);
            body.putObject("delta").put("type", "input_json_delta").put("partial_json", c.arguments());
            event("content_block_delta", body);
        }
    }

    private void start() {
        ObjectNode body = JSON.createObjectNode().put("index", content.size() - 1);
        ObjectNode block = open.deepCopy();
        if (block.path("type").asText().equals("text")) {
            block.put("text", "");
        } else if (block.path("type").asText().equals("thinking")) {
            block.put("thinking", "").put("signature", "");
        }
        body.set("content_block", block);
        event("content_block_start", body);
    }

    private void delta(String type, String piece) {
        if (open == null || !open.path("type").asText().equals(type)) {
            close();
            open = content.addObject().put("type", type);
            text.setLength(0);
            start();
        }
        text.append(piece);
        ObjectNode body = JSON.createObjectNode().put("index", content.size() - 1);
        if (type.equals("thinking")) {
            body.putObject("delta").put("type", "thinking_delta").put("thinking", piece);
        } else {
            body.putObject("delta").put("type", "text_delta").put("text", piece);
        }
        event("content_block_delta", body);
    }

    /** Ends the open block. */
    void close() {
        if (open == null) {
            return;
        }
        int index = content.size() - 1;
        switch (open.path("type").asText()) {
            case "thinking" -> {
                open.put("thinking", text.toString()).put("signature", "");
                ObjectNode sig = JSON.createObjectNode().put("index", index);
                sig.putObject("delta").put("type", "signature_delta").put("signature", "");
                event("content_block_delta", sig);
            }
            case "text" -> open.put("text", text.toString());
            case "tool_use" -> {
                try {
                    open.set("input", text.isEmpty() ? JSON.createObjectNode() : JSON.readTree(text.toString()));
                } catch (Exception e) {
                    throw new IllegalStateException("a tool call's arguments are not JSON: " + text, e);
                }
            }
            default -> throw new IllegalStateException(open.toString());
        }
        event("content_block_stop", JSON.createObjectNode().put("index", index));
        open = null;
        openCall = -1;
        text.setLength(0);
    }
}

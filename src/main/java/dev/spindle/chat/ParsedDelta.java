package dev.spindle.chat;

import java.util.List;

/**
 * What one step of generated text adds to a reply: reasoning text, reply text, the tool calls
 * completed in this step (each delivered once, whole), and the pieces of calls written in this
 * step ({@link ToolCallDelta}: a call's id and name as soon as its function is named, then its
 * arguments as each parameter is complete). Within one step the content comes before the call
 * pieces: text that follows a call is released in a later step.
 */
public record ParsedDelta(String reasoning, String content, List<ToolCall> toolCalls, List<ToolCallDelta> callDeltas) {
    public static final ParsedDelta EMPTY = new ParsedDelta("", "", List.of(), List.of());

    public ParsedDelta {
        toolCalls = List.copyOf(toolCalls);
        callDeltas = List.copyOf(callDeltas);
    }

    /** Text only: no tool calls. */
    public static ParsedDelta text(String reasoning, String content) {
        return new ParsedDelta(reasoning, content, List.of(), List.of());
    }

    public boolean isEmpty() {
        return reasoning.isEmpty() && content.isEmpty() && toolCalls.isEmpty() && callDeltas.isEmpty();
    }
}

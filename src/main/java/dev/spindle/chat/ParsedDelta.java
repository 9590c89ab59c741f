package dev.spindle.chat;

import java.util.List;

/**
 * What one step of generated text adds to a reply: reasoning text, reply text, and
 * tool calls completed in this step (each delivered once, whole).
 */
public record ParsedDelta(String reasoning, String content, List<ToolCall> toolCalls) {
    public static final ParsedDelta EMPTY = new ParsedDelta("", "", List.of());

    public ParsedDelta {
        toolCalls = List.copyOf(toolCalls);
    }

    public boolean isEmpty() {
        return reasoning.isEmpty() && content.isEmpty() && toolCalls.isEmpty();
    }
}

package dev.spindle.engine;

import dev.spindle.chat.ToolCall;

import java.util.List;

/**
 * A finished chat turn.
 *
 * @param finishReason "stop" (end of turn), "length" (max tokens) or "tool_calls"
 */
public record ChatReply(String reasoning, String content, List<ToolCall> toolCalls, String finishReason,
                        int promptTokens, int completionTokens, int[] tokens) {
    public ChatReply {
        toolCalls = List.copyOf(toolCalls);
    }
}

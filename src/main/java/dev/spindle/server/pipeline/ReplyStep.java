package dev.spindle.server.pipeline;

import dev.spindle.chat.ParsedDelta;
import dev.spindle.engine.TokenEvent;

/**
 * One step of one choice of a chat reply, as every API (chat completions, Responses, Messages)
 * renders it: what the token added (reasoning, content, tool-call pieces), the token itself, and
 * the choice's counts so far. {@code finishReason} is set on the choice's last step: "stop",
 * "length" or "tool_calls".
 *
 * @param stopReason vLLM's stop_reason: the stop string or stop token id that ended the choice, or null
 */
public record ReplyStep(int choice, ParsedDelta delta, TokenEvent event, String finishReason, Object stopReason,
                        int promptTokens, int completionTokens, int cachedTokens, int reasoningTokens) {
    public boolean last() {
        return finishReason != null;
    }
}

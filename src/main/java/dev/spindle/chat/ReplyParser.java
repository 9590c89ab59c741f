package dev.spindle.chat;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * Reads what the model writes, step by step: reasoning first ({@link ReasoningParser}),
 * then the reply, in which tool calls are found when the request offered tools
 * ({@link ToolCallParser}). Feeding the text in any split gives the same result as
 * feeding it whole.
 */
public final class ReplyParser {
    private final ReasoningParser reasoning;
    private final ToolCallParser toolCalls; // null: no tools offered, the reply is all content

    public ReplyParser(boolean startsInReasoning, ToolSchemas tools, Supplier<String> ids) {
        this.reasoning = new ReasoningParser(startsInReasoning);
        this.toolCalls = tools == null || tools.isEmpty() ? null : new ToolCallParser(tools, ids);
    }

    public ParsedDelta next(String delta) {
        String[] rc = reasoning.next(delta);
        return combine(rc[0], rc[1], false);
    }

    public ParsedDelta finish() {
        String[] rc = reasoning.finish();
        return combine(rc[0], rc[1], true);
    }

    private ParsedDelta combine(String reasoningText, String content, boolean end) {
        if (toolCalls == null) {
            return ParsedDelta.text(reasoningText, content);
        }
        ParsedDelta d = toolCalls.next(content);
        if (!end) {
            return new ParsedDelta(reasoningText, d.content(), d.toolCalls(), d.callDeltas());
        }
        ParsedDelta f = merge(List.of(d, toolCalls.finish()));
        return new ParsedDelta(reasoningText, f.content(), f.toolCalls(), f.callDeltas());
    }

    /** Parses a whole reply at once. */
    public static ParsedDelta parseAll(String text, boolean startsInReasoning, ToolSchemas tools, Supplier<String> ids) {
        ReplyParser p = new ReplyParser(startsInReasoning, tools, ids);
        return merge(List.of(p.next(text), p.finish()));
    }

    /** Concatenates step results. */
    public static ParsedDelta merge(List<ParsedDelta> steps) {
        StringBuilder r = new StringBuilder(), c = new StringBuilder();
        List<ToolCall> calls = new ArrayList<>();
        List<ToolCallDelta> pieces = new ArrayList<>();
        for (ParsedDelta d : steps) {
            r.append(d.reasoning());
            c.append(d.content());
            calls.addAll(d.toolCalls());
            pieces.addAll(d.callDeltas());
        }
        return new ParsedDelta(r.toString(), c.toString(), calls, pieces);
    }
}

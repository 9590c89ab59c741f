package dev.spindle.server.openai;

import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.StopMatcher;
import dev.spindle.engine.TokenEvent;
import dev.spindle.tokenizer.IncrementalDetokenizer;
import dev.spindle.tokenizer.Tokenizer;

import java.util.List;

/**
 * One choice's tokens turned into text: detokenized incrementally, cut at the first stop
 * string, and (for chat) split into reasoning, content and tool calls.
 */
final class ChoiceText {
    private final IncrementalDetokenizer detok;
    private final StopMatcher stops;
    private final ReplyParser parser; // null for plain completions
    private final java.util.Set<Integer> endIds;
    String finishReason;
    boolean sawToolCalls;
    int completionTokens;
    int promptTokens;
    int cachedTokens;

    ChoiceText(Tokenizer tok, boolean skipSpecial, List<String> stopStrings, ReplyParser parser, java.util.Set<Integer> endIds) {
        this.detok = new IncrementalDetokenizer(tok, skipSpecial);
        this.stops = new StopMatcher(stopStrings);
        this.parser = parser;
        this.endIds = endIds;
    }

    /** Text released by this token; sets {@link #finishReason} when the choice ends here. */
    ParsedDelta next(TokenEvent e) {
        completionTokens = e.completionTokens();
        promptTokens = e.promptTokens();
        cachedTokens = e.cachedTokens();
        String text = "";
        boolean endToken = e.token() < 0 || (e.finishReason() != null && "stop".equals(e.finishReason()) && endIds.contains(e.token()));
        if (!endToken) {
            text = stops.feed(detok.next(e.token()));
        }
        if (stops.stopped()) {
            finishReason = "stop";
        } else if (e.finishReason() != null) {
            finishReason = e.finishReason();
        }
        if (finishReason == null) {
            ParsedDelta d = parser == null ? new ParsedDelta("", text, List.of()) : parser.next(text);
            sawToolCalls |= !d.toolCalls().isEmpty();
            return d;
        }
        String rest = stops.stopped() ? "" : stops.feed(detok.flush()) + stops.flush();
        if (parser == null) {
            return new ParsedDelta("", text + rest, List.of());
        }
        ParsedDelta d = ReplyParser.merge(List.of(parser.next(text + rest), parser.finish()));
        sawToolCalls |= !d.toolCalls().isEmpty();
        if (sawToolCalls) {
            finishReason = "tool_calls";
        }
        return d;
    }

    boolean finished() {
        return finishReason != null;
    }
}

package dev.spindle.server.pipeline;

import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.StopMatcher;
import dev.spindle.engine.TokenEvent;
import dev.spindle.tokenizer.IncrementalDetokenizer;
import dev.spindle.tokenizer.Tokenizer;

import java.util.List;
import java.util.Set;

/**
 * One choice's tokens turned into text: detokenized incrementally, cut at the first stop
 * string (kept with vLLM's {@code include_stop_str_in_output}; not looked for before
 * {@code min_tokens}), and (for chat) split into reasoning, content and tool calls.
 */
public final class ChoiceText {
    private final IncrementalDetokenizer detok;
    private final StopMatcher stops;
    private final ReplyParser parser; // null for plain completions
    private final Set<Integer> endIds;
    private final Set<Integer> stopTokenIds;
    private final GenerationRequest gen;
    private final int reasoningEnd; // the token that closes the prompt's open think block, or -1
    private boolean inReasoning;
    private String finishReason;
    /** vLLM's stop_reason: the stop string or stop token id that ended the choice, null otherwise. */
    private Object stopReason;
    boolean sawToolCalls;
    private int completionTokens;
    int promptTokens;
    private int cachedTokens;
    int reasoningTokens;

    /**
     * @param endIds       ids that end the reply (EOS, end of turn, stop_token_ids): their text is never output
     * @param reasoningEnd the id that closes a think block the prompt opened, or -1
     */
    public ChoiceText(Tokenizer tok, GenerationRequest gen, ReplyParser parser, Set<Integer> endIds, int reasoningEnd) {
        this.detok = new IncrementalDetokenizer(tok, gen.skipSpecialTokens());
        this.stops = new StopMatcher(gen.stops());
        this.parser = parser;
        this.endIds = endIds;
        this.stopTokenIds = gen.params().stopTokenIds();
        this.gen = gen;
        this.reasoningEnd = reasoningEnd;
        this.inReasoning = reasoningEnd >= 0;
    }

    /** Text released by this token; sets {@link #finishReason} when the choice ends here. */
    public ParsedDelta next(TokenEvent e) {
        completionTokens = e.completionTokens();
        promptTokens = e.promptTokens();
        cachedTokens = e.cachedTokens();
        if (inReasoning && e.token() >= 0) {
            reasoningTokens++;
            inReasoning = e.token() != reasoningEnd;
        }
        String text = "";
        boolean endToken = e.token() < 0 || (e.finishReason() != null && "stop".equals(e.finishReason()) && endIds.contains(e.token()));
        boolean matching = completionTokens > gen.params().minTokens();
        if (!endToken) {
            text = stops.feed(detok.next(e.token()), matching);
        }
        if (stops.stopped()) {
            finishReason = "stop";
            stopReason = stops.matched();
            if (gen.includeStopStr()) {
                text += stops.matched();
            }
        } else if (e.finishReason() != null) {
            finishReason = e.finishReason();
            if ("stop".equals(finishReason) && stopTokenIds.contains(e.token())) {
                stopReason = e.token();
            }
        }
        if (finishReason == null) {
            ParsedDelta d = parser == null ? ParsedDelta.text("", text) : parser.next(text);
            sawToolCalls |= !d.toolCalls().isEmpty();
            return d;
        }
        String rest = stops.stopped() ? "" : stops.feed(detok.flush(), matching) + stops.flush();
        if (parser == null) {
            return ParsedDelta.text("", text + rest);
        }
        ParsedDelta d = ReplyParser.merge(List.of(parser.next(text + rest), parser.finish()));
        sawToolCalls |= !d.toolCalls().isEmpty();
        if (sawToolCalls && "stop".equals(finishReason)) {
            finishReason = "tool_calls";
        }
        return d;
    }

    /** Why the choice ended (stop, length, tool_calls), null while it goes on. */
    public String finishReason() {
        return finishReason;
    }

    /** vLLM's stop_reason: the stop string or stop token id that ended the choice, null otherwise. */
    public Object stopReason() {
        return stopReason;
    }

    /** Tokens generated so far. */
    public int completionTokens() {
        return completionTokens;
    }

    /** Prompt tokens served from the prefix cache. */
    public int cachedTokens() {
        return cachedTokens;
    }

    public boolean finished() {
        return finishReason != null;
    }
}

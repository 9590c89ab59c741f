package dev.spindle.engine;

import dev.spindle.chat.ChatFormat;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.sched.EngineCore;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;
import dev.spindle.tokenizer.IncrementalDetokenizer;
import dev.spindle.tokenizer.Tokenizer;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.function.Consumer;

/**
 * One chat turn, messages in, parsed reply out: the model's own template renders the
 * prompt, the tokenizer encodes it (no special tokens added), greedy decoding runs on
 * the forward pass until an end-of-turn id, and each step's text goes through the
 * incremental detokenizer and the reply parser (reasoning, content, tool calls).
 */
public final class ChatRunner {
    private final ForwardPass model;
    private final Tokenizer tokenizer;
    private final ChatTemplate template;
    private final Set<Integer> stopIds = new HashSet<>();
    private Speculation speculation = Speculation.NONE;
    private EngineCore core;

    /** Decode with speculative decoding (a draft model or prompt lookup): greedy, the reply is the same, token for token. */
    public ChatRunner withSpeculation(Speculation speculation) {
        this.speculation = speculation;
        this.core = null;
        return this;
    }

    /** What the turns so far drafted and accepted. */
    public SpecStats speculationStats() {
        return core == null ? SpecStats.NONE : core.stats().speculative();
    }

    public ChatRunner(ForwardPass model, Tokenizer tokenizer, ChatTemplate template) {
        this.model = model;
        this.tokenizer = tokenizer;
        this.template = template;
        stopIds.addAll(ChatFormat.of(model.config()).endOfTurnIds(model.config(), tokenizer));
    }

    /** The prompt as the model sees it. */
    public String render(List<?> messages, List<?> tools, Map<String, Object> kwargs) {
        Map<String, Object> vars = new LinkedHashMap<>(kwargs);
        vars.putIfAbsent("add_generation_prompt", true);
        return template.render(messages, tools, vars);
    }

    /**
     * @param onDelta called with each step's parsed text as it is generated
     */
    public ChatReply complete(List<?> messages, List<?> tools, Map<String, Object> kwargs, int maxTokens, Consumer<ParsedDelta> onDelta) {
        String prompt = render(messages, tools, kwargs);
        int[] ids = tokenizer.encode(prompt);
        ReplyParser parser = ChatFormat.of(model.config()).replyParser(prompt, ToolSchemas.of(tools),
                () -> "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24));
        IncrementalDetokenizer detok = new IncrementalDetokenizer(tokenizer, true);
        List<ParsedDelta> steps = new ArrayList<>();
        Consumer<ParsedDelta> sink = d -> {
            if (!d.isEmpty()) {
                steps.add(d);
                onDelta.accept(d);
            }
        };
        java.util.function.IntConsumer onToken = t -> {
            if (!stopIds.contains(t)) {
                sink.accept(parser.next(detok.next(t)));
            }
        };
        // one request on the engine the server runs, stepped on this thread
        if (core == null) {
            core = new EngineCore(model, 512, 1, stopIds, speculation);
        }
        List<Integer> out = new ArrayList<>();
        String[] ended = {null};
        RuntimeException[] failure = {null};
        core.add(1, ids, SamplingParams.greedy(maxTokens), new TokenSink() {
            @Override
            public void onToken(TokenEvent e) {
                if (e.token() >= 0) {
                    out.add(e.token());
                    onToken.accept(e.token());
                }
                ended[0] = e.finishReason();
            }

            @Override
            public void onError(Throwable error) {
                failure[0] = error instanceof RuntimeException r ? r : new IllegalStateException(error);
            }
        });
        while (!core.idle()) {
            core.step();
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        int[] tokens = out.stream().mapToInt(Integer::intValue).toArray();
        boolean eos = "stop".equals(ended[0]);
        sink.accept(parser.next(detok.flush()));
        sink.accept(parser.finish());
        ParsedDelta all = ReplyParser.merge(steps);
        List<ToolCall> calls = all.toolCalls();
        String finish = !calls.isEmpty() ? "tool_calls" : eos ? "stop" : "length";
        return new ChatReply(all.reasoning(), all.content(), calls, finish, ids.length, tokens.length, tokens);
    }
}

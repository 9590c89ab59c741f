package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.chat.ChatFormat;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.SystemMessages;
import dev.spindle.chat.ToolCallRecognizer;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.TokenEvent;
import dev.spindle.grammar.GrammarConstraint;
import dev.spindle.grammar.Recognizer;
import dev.spindle.grammar.Schema;
import dev.spindle.server.ModelService;
import dev.spindle.server.TokenStreams;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The one pipeline every chat API runs: {@link #prepare} (a chat-completions body, what the Responses
 * and Messages APIs translate theirs into: fields checked, messages rendered by the model's template,
 * tokenized, fitted to the context, the grammar its tools and response format ask for), {@link #run}
 * (each choice submitted to the engine, its tokens read into {@link ReplyStep}s) and {@link #collect}
 * (a choice's steps whole, for non-streamed replies). The APIs' writers only render the steps.
 */
@ApplicationScoped
public class ChatPipeline {
    private final ModelService service;
    private final TokenStreams streams;

    public ChatPipeline(ModelService service, TokenStreams streams) {
        this.service = service;
        this.streams = streams;
    }

    /** The context GenerationRequest.parse needs from the served model. */
    public GenerationRequest.Context generationContext() {
        return new GenerationRequest.Context(service.generationDefaults(), service.config().defaultMaxTokens().orElse(Integer.MAX_VALUE), service.modelConfig().vocabSize(),
                service.config().maxLogprobs(), service.tokenizer()::encode);
    }

    /**
     * A chat-completions request body (what the Responses and Messages APIs translate theirs into)
     * made ready for the engine: messages rendered by the template, the grammar its tools and
     * response_format ask for, the sampling parameters.
     */
    public ChatRequest prepare(JsonNode body) {
        List<?> messages = ChatMessages.parse(body.get("messages"), "messages");
        List<?> tools = ChatMessages.tools(body.get("tools"), "tools");
        Schema schema = RequestGrammar.responseSchema(body);
        String toolChoice = RequestGrammar.toolChoice(body.get("tool_choice"));
        boolean parallel = Fields.bool(body, "parallel_tool_calls", true);
        if (Fields.bool(body, "echo", false)) {
            throw ApiException.badRequest("echo is not supported on chat completions; use /v1/completions with echo", "echo");
        }
        Map<String, Object> kwargs = ChatMessages.templateKwargs(body);
        boolean continueFinal = Fields.bool(body, "continue_final_message", false);
        JsonNode agp = Fields.get(body, "add_generation_prompt");
        boolean addPrompt = Fields.bool(body, "add_generation_prompt", !continueFinal);
        if (continueFinal && addPrompt) {
            throw ApiException.badRequest("continue_final_message and add_generation_prompt cannot both be true", agp != null ? "add_generation_prompt" : "continue_final_message");
        }
        kwargs.putIfAbsent("add_generation_prompt", addPrompt);
        boolean xmlCalls = !"json".equals(kwargs.get("tool_call_format"));
        boolean forced = toolChoice.equals("required") || toolChoice.startsWith("function:");
        if (forced && tools == null) {
            throw ApiException.badRequest("tool_choice '" + toolChoice.replace("function:", "") + "' needs tools", "tool_choice");
        }
        if (forced && !xmlCalls) {
            throw ApiException.badRequest("forced tool calls are enforced in the template's XML call format; drop tool_call_format=json", "tool_choice");
        }
        if (schema != null && forced) {
            throw ApiException.badRequest("response_format and a forced tool_choice cannot be combined", "response_format");
        }
        // tool_choice "none": the tools stay out of the prompt (the model is not told of them, as in a chat
        // without tools) and the reply is not searched for calls
        List<?> offered = toolChoice.equals("none") ? null : tools;
        RequestGrammar.strictTools(tools);
        ToolSchemas toolSchemas = ToolSchemas.of(offered);
        Map<String, Schema> forcedFunctions = null;
        if (forced) {
            forcedFunctions = RequestGrammar.strictFunctions(tools, toolChoice);
            String unwritable = ToolCallRecognizer.unwritableName(forcedFunctions);
            if (unwritable != null) {
                throw ApiException.badRequest(unwritable + ", so the call cannot be forced", "tools");
            }
        }
        Recognizer grammar = service.chatFormat().replyGrammar(offered == null ? null : toolSchemas, forcedFunctions, toolChoice.equals("required"),
                parallel, xmlCalls, schema);
        GenerationRequest gen = GenerationRequest.parse(body, generationContext(), true);
        String prompt = render(messages, offered, kwargs);
        if (continueFinal) {
            prompt = continuation(prompt, messages);
        }
        int[] ids = Fields.bool(body, "add_special_tokens", false) ? service.tokenizer().encodeWithSpecialTokens(prompt) : service.tokenizer().encode(prompt);
        ids = gen.truncate(ids, service.modelConfig().maxPositions());
        gen = gen.fitToContext(ids.length, service.modelConfig().maxPositions());
        try {
            service.engine().validate(ids, gen.params());
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), "max_tokens");
        }
        ChatFormat format = service.chatFormat();
        boolean inReasoning = format.promptOpensReasoning(prompt);
        int thinkEnd = inReasoning ? format.reasoningEndId(service.tokenizer()) : -1;
        if (grammar != null) {
            Recognizer start = grammar;
            gen = gen.withParams(gen.params().withConstraint(() -> new GrammarConstraint(start, service.tokenTexts(), service.eosIds(), thinkEnd)));
        }
        String requestId = Fields.string(body, "request_id", UUID.randomUUID().toString().replace("-", ""));
        return new ChatRequest("chatcmpl-" + requestId, System.currentTimeMillis() / 1000, ids, gen, inReasoning, toolSchemas, thinkEnd);
    }

    /**
     * The prompt's length in tokens as {@link #prepare} renders it, with no check against the context
     * (count_tokens, and context editing measuring what it clears).
     */
    public int promptTokens(JsonNode body) {
        List<?> messages = ChatMessages.parse(body.get("messages"), "messages");
        List<?> tools = ChatMessages.tools(body.get("tools"), "tools");
        Map<String, Object> kwargs = ChatMessages.templateKwargs(body);
        kwargs.putIfAbsent("add_generation_prompt", true);
        List<?> offered = RequestGrammar.toolChoice(body.get("tool_choice")).equals("none") ? null : tools;
        return service.tokenizer().encode(render(messages, offered, kwargs)).length;
    }

    /**
     * The template's rendering of the conversation. Where it refuses a system message after the first turn
     * (as Nanbeige's does), the conversation is rendered with the system messages merged at the front
     * ({@link SystemMessages}); any other refusal is a 400 with the template's own message.
     */
    public String render(List<?> messages, List<?> tools, Map<String, Object> kwargs) {
        try {
            return service.template().render(messages, tools, kwargs);
        } catch (ChatTemplateException e) {
            if (!SystemMessages.anyAfterFirst(messages)) {
                throw ApiException.badRequest(e.getMessage(), "messages");
            }
            try {
                return service.template().render(SystemMessages.mergedToFront(messages), tools, kwargs);
            } catch (ChatTemplateException merged) {
                throw ApiException.badRequest(merged.getMessage(), "messages");
            }
        }
    }

    /**
     * vLLM's continue_final_message: the prompt rendered without a generation prompt, cut right
     * after the final assistant message's text, so that the model goes on writing it.
     */
    static String continuation(String prompt, List<?> messages) {
        Object last = messages.get(messages.size() - 1);
        Map<?, ?> m = last instanceof Map<?, ?> map ? map : Map.of();
        String field = "messages[" + (messages.size() - 1) + "]";
        if (!"assistant".equals(m.get("role"))) {
            throw ApiException.badRequest("continue_final_message needs the last message to be the assistant's", field + ".role");
        }
        Object content = m.get("content");
        String text = content instanceof String str ? str : ChatMessages.textOf(content);
        if (text.isEmpty()) {
            throw ApiException.badRequest("continue_final_message needs the final assistant message to have text to continue", field + ".content");
        }
        int at = prompt.lastIndexOf(text);
        if (at < 0) {
            throw ApiException.badRequest("the chat template does not render the final assistant message's text verbatim, so it cannot be continued",
                    field + ".content");
        }
        return prompt.substring(0, at + text.length());
    }

    private ChoiceText choiceText(ChatRequest p) {
        Set<Integer> ends = new HashSet<>(service.eosIds());
        ends.addAll(p.gen().params().stopTokenIds());
        return new ChoiceText(service.tokenizer(), p.gen(),
                new ReplyParser(p.inReasoning(), p.tools(), () -> "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24)), ends,
                p.inReasoning() ? p.reasoningEnd() : -1);
    }

    /**
     * The reply of each choice, step by step: the one pipeline every chat API renders from. Requests
     * are submitted now (a full queue refuses them before any response begins); a choice's stream
     * ends at its last step (a stop string found cancels the rest upstream).
     */
    public List<Multi<ReplyStep>> run(ChatRequest p) {
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        List<Multi<ReplyStep>> out = new ArrayList<>();
        for (int i = 0; i < generations.size(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            out.add(generations.get(i).select().first(e -> !text.finished()).map(e -> {
                ParsedDelta d = text.next(e);
                return new ReplyStep(index, d, e, text.finishReason(), text.stopReason(), text.promptTokens, text.completionTokens(), text.cachedTokens(),
                        text.reasoningTokens);
            }));
        }
        return out;
    }

    /** Every step of one choice, collected: what a non-streamed reply is made of. */
    public record Collected(ParsedDelta all, List<TokenEvent> events, List<ReplyStep> steps, ReplyStep last) {
    }

    /** Each choice's steps collected (the non-streaming replies of every API). */
    public Uni<List<Collected>> collect(ChatRequest p) {
        List<Uni<Collected>> choices = new ArrayList<>();
        for (Multi<ReplyStep> steps : run(p)) {
            choices.add(steps.collect().asList().map(list -> {
                List<ParsedDelta> parts = new ArrayList<>();
                List<TokenEvent> events = new ArrayList<>();
                for (ReplyStep s : list) {
                    parts.add(s.delta());
                    events.add(s.event());
                }
                return new Collected(ReplyParser.merge(parts), events, list, list.getLast());
            }));
        }
        return Uni.join().all(choices).andFailFast();
    }
}

package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.SystemMessages;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolCallDelta;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.TokenEvent;
import dev.spindle.grammar.EitherRecognizer;
import dev.spindle.grammar.GrammarConstraint;
import dev.spindle.grammar.JsonRecognizer;
import dev.spindle.grammar.Recognizer;
import dev.spindle.chat.ToolCallRecognizer;
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
 * POST /v1/chat/completions: messages rendered by the model's own template, reasoning
 * returned as {@code reasoning_content}, XML/JSON tool calls as {@code tool_calls},
 * streamed as SSE chunks or returned whole.
 */
@ApplicationScoped
public class ChatCompletions {
    public static final ObjectMapper JSON = new ObjectMapper();
    private final ModelService service;
    private final TokenStreams streams;

    public ChatCompletions(ModelService service, TokenStreams streams) {
        this.service = service;
        this.streams = streams;
    }

    /** A prepared request: prompt ids and how each choice's text is read. */
    public record Prepared(String id, long created, int[] prompt, GenerationRequest gen, boolean inReasoning, ToolSchemas tools, int reasoningEnd) {
    }

    /** The context GenerationRequest.parse needs from the served model. */
    GenerationRequest.Context generationContext() {
        return new GenerationRequest.Context(service.generationDefaults(), service.config().defaultMaxTokens().orElse(Integer.MAX_VALUE), service.modelConfig().vocabSize(),
                service.config().maxLogprobs(), service.tokenizer()::encode);
    }

    /**
     * A chat-completions request body (what the Responses and Messages APIs translate theirs into)
     * made ready for the engine: messages rendered by the template, the grammar its tools and
     * response_format ask for, the sampling parameters.
     */
    public Prepared prepare(JsonNode body) {
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
        Recognizer grammar = null;
        // names the XML format cannot hold: a forced call is refused, under auto the calls are parsed but not constrained
        boolean writable = offered != null && ToolCallRecognizer.unwritableName(toolSchemas.functions()) == null;
        if (forced) {
            Map<String, Schema> functions = RequestGrammar.strictFunctions(tools, toolChoice);
            String unwritable = ToolCallRecognizer.unwritableName(functions);
            if (unwritable != null) {
                throw ApiException.badRequest(unwritable + ", so the call cannot be forced", "tools");
            }
            grammar = ToolCallRecognizer.forced(functions, toolChoice.equals("required") && parallel);
        } else if (writable && xmlCalls) {
            grammar = ToolCallRecognizer.lazy(toolSchemas.functions(), parallel); // free text until <tool_call>, then the tools' schemas
        }
        if (schema != null) {
            Recognizer json = JsonRecognizer.start(schema);
            grammar = grammar == null ? json : EitherRecognizer.of(ToolCallRecognizer.forced(toolSchemas.functions(), parallel), json);
        }
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
        dev.spindle.chat.ChatFormat format = service.chatFormat();
        boolean inReasoning = format.promptOpensReasoning(prompt);
        int thinkEnd = inReasoning ? format.reasoningEndId(service.tokenizer()) : -1;
        if (grammar != null) {
            Recognizer start = grammar;
            gen = gen.withParams(gen.params().withConstraint(() -> new GrammarConstraint(start, service.tokenTexts(), service.eosIds(), thinkEnd)));
        }
        String requestId = Fields.string(body, "request_id", UUID.randomUUID().toString().replace("-", ""));
        return new Prepared("chatcmpl-" + requestId, System.currentTimeMillis() / 1000, ids, gen, inReasoning, toolSchemas, thinkEnd);
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
    String render(List<?> messages, List<?> tools, Map<String, Object> kwargs) {
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

    private ChoiceText choiceText(Prepared p) {
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
    public List<Multi<ReplyStep>> run(Prepared p) {
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        List<Multi<ReplyStep>> out = new ArrayList<>();
        for (int i = 0; i < generations.size(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            out.add(generations.get(i).select().first(e -> !text.finished()).map(e -> {
                ParsedDelta d = text.next(e);
                return new ReplyStep(index, d, e, text.finishReason, text.stopReason, text.promptTokens, text.completionTokens, text.cachedTokens,
                        text.reasoningTokens);
            }));
        }
        return out;
    }

    /** The SSE stream: one chunk per step with text, a final chunk with finish_reason, usage if asked, then [DONE]. */
    public Multi<String> stream(Prepared p) {
        List<Multi<String>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        int[] cached = new int[1];
        boolean[] promptLogprobsSent = {false};
        for (Multi<ReplyStep> steps : run(p)) {
            boolean[] first = {true};
            choices.add(steps.onItem().transformToMultiAndConcatenate(step -> {
                ParsedDelta d = step.delta();
                int index = step.choice();
                completion[index] = step.completionTokens();
                cached[0] = step.cachedTokens();
                List<String> out = new ArrayList<>();
                ObjectNode delta = JSON.createObjectNode();
                if (first[0]) {
                    delta.put("role", "assistant");
                    first[0] = false;
                }
                if (!d.reasoning().isEmpty()) {
                    delta.put("reasoning_content", d.reasoning());
                    delta.put("reasoning", d.reasoning());
                }
                if (!d.content().isEmpty()) {
                    delta.put("content", d.content());
                }
                if (!d.callDeltas().isEmpty()) {
                    ArrayNode calls = delta.putArray("tool_calls");
                    for (ToolCallDelta c : d.callDeltas()) {
                        calls.add(toolCallDeltaJson(c));
                    }
                }
                ObjectNode logprobs = p.gen().logprobs() ? logprobsJson(List.of(step.event()), p.gen().topLogprobs(), p.gen().tokenIdsAsKeys()) : null;
                if (!delta.isEmpty() || step.last() || logprobs != null) {
                    ObjectNode chunk = chunk(p, index, delta, step.finishReason(), logprobs);
                    if (step.last()) {
                        putStopReason((ObjectNode) chunk.get("choices").get(0), step.stopReason());
                    }
                    if (p.gen().promptLogprobs() >= 0 && !promptLogprobsSent[0] && step.event().promptLogprobs() != null) {
                        promptLogprobsSent[0] = true;
                        chunk.set("prompt_logprobs", promptLogprobsJson(p.prompt(), step.event().promptLogprobs(), p.gen().promptLogprobs()));
                    }
                    if (p.gen().continuousUsage()) {
                        chunk.set("usage", usage(p.prompt().length, step.completionTokens(), step.cachedTokens()));
                    }
                    out.add(sse(chunk));
                }
                return Multi.createFrom().iterable(out);
            }));
        }
        Multi<String> merged = Multi.createBy().merging().streams(choices);
        return merged.onCompletion().switchTo(() -> {
            List<String> tail = new ArrayList<>();
            if (p.gen().includeUsage()) {
                ObjectNode u = chunkBase(p);
                u.putArray("choices");
                u.set("usage", usage(p.prompt().length, sum(completion), cached[0]));
                tail.add(sse(u));
            }
            tail.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(tail);
        });
    }

    /** Every step of one choice, collected: what a non-streamed reply is made of. */
    public record Collected(ParsedDelta all, List<TokenEvent> events, List<ReplyStep> steps, ReplyStep last) {
    }

    /** Each choice's steps collected (the non-streaming replies of every API). */
    public Uni<List<Collected>> collect(Prepared p) {
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

    /** The whole reply as one chat.completion object. */
    public Uni<ObjectNode> complete(Prepared p) {
        return collect(p).map(list -> {
            ObjectNode r = JSON.createObjectNode();
            r.put("id", p.id()).put("object", "chat.completion").put("created", p.created()).put("model", service.servedName());
            ArrayNode arr = r.putArray("choices");
            int completion = 0;
            int cached = 0;
            for (Collected c : list) {
                ParsedDelta all = c.all();
                ReplyStep last = c.last();
                completion += last.completionTokens();
                cached = last.cachedTokens();
                ObjectNode message = JSON.createObjectNode().put("role", "assistant");
                message.put("content", all.content().isEmpty() && !all.toolCalls().isEmpty() ? null : all.content());
                if (!all.reasoning().isEmpty()) {
                    message.put("reasoning_content", all.reasoning());
                    message.put("reasoning", all.reasoning());
                }
                if (!all.toolCalls().isEmpty()) {
                    ArrayNode calls = message.putArray("tool_calls");
                    all.toolCalls().forEach(t -> calls.add(toolCallJson(t)));
                }
                ObjectNode choice = arr.addObject().put("index", last.choice());
                choice.set("message", message);
                choice.set("logprobs", p.gen().logprobs() ? logprobsJson(c.events(), p.gen().topLogprobs(), p.gen().tokenIdsAsKeys()) : null);
                choice.put("finish_reason", last.finishReason() == null ? "stop" : last.finishReason());
                putStopReason(choice, last.stopReason());
                if (p.gen().promptLogprobs() >= 0 && !r.has("prompt_logprobs")) {
                    TokenEvent.PromptLogprobs pl = c.events().isEmpty() ? null : c.events().getFirst().promptLogprobs();
                    if (pl != null) {
                        r.set("prompt_logprobs", promptLogprobsJson(p.prompt(), pl, p.gen().promptLogprobs()));
                    }
                }
            }
            r.set("usage", usage(p.prompt().length, completion, cached));
            return r;
        });
    }

    static void putStopReason(ObjectNode choice, Object stopReason) {
        if (stopReason instanceof Integer id) {
            choice.put("stop_reason", id);
        } else if (stopReason instanceof String str) {
            choice.put("stop_reason", str);
        } else {
            choice.putNull("stop_reason");
        }
    }

    /**
     * vLLM's prompt_logprobs: one entry per prompt token, null for the first; otherwise the token's own
     * logprob and the top alternatives, keyed by token id, each with its rank (1 = most likely; the
     * prompt token's rank is given when it is among the alternatives, else null) and decoded text.
     */
    ArrayNode promptLogprobsJson(int[] prompt, TokenEvent.PromptLogprobs pl, int top) {
        ArrayNode out = JSON.createArrayNode();
        for (int i = 0; i < prompt.length && i < pl.logprobs().length; i++) {
            if (i == 0 || Double.isNaN(pl.logprobs()[i])) {
                out.addNull();
                continue;
            }
            ObjectNode pos = out.addObject();
            int[] ids = pl.topIds()[i];
            double[] lps = pl.topLogprobs()[i];
            int rank = -1;
            for (int k = 0; k < ids.length; k++) {
                if (ids[k] == prompt[i]) {
                    rank = k + 1;
                }
            }
            ObjectNode own = pos.putObject(String.valueOf(prompt[i])).put("logprob", pl.logprobs()[i]);
            if (rank > 0) {
                own.put("rank", rank);
            } else {
                own.putNull("rank");
            }
            own.put("decoded_token", service.tokenizer().decode(new int[]{prompt[i]}, false));
            for (int k = 0; k < Math.min(top, ids.length); k++) {
                if (ids[k] == prompt[i]) {
                    continue;
                }
                pos.putObject(String.valueOf(ids[k])).put("logprob", lps[k]).put("rank", k + 1)
                        .put("decoded_token", service.tokenizer().decode(new int[]{ids[k]}, false));
            }
        }
        return out;
    }

    private static int sum(int[] a) {
        int s = 0;
        for (int x : a) {
            s += x;
        }
        return s;
    }

    private ObjectNode chunkBase(Prepared p) {
        ObjectNode c = JSON.createObjectNode();
        c.put("id", p.id()).put("object", "chat.completion.chunk").put("created", p.created()).put("model", service.servedName());
        return c;
    }

    private ObjectNode chunk(Prepared p, int index, ObjectNode delta, String finish, ObjectNode logprobs) {
        ObjectNode c = chunkBase(p);
        ObjectNode choice = c.putArray("choices").addObject();
        choice.put("index", index);
        choice.set("delta", delta);
        choice.set("logprobs", logprobs);
        choice.put("finish_reason", finish);
        return c;
    }

    /** A piece of a streamed call: the first carries id, type and name; later ones argument fragments. */
    static ObjectNode toolCallDeltaJson(ToolCallDelta c) {
        ObjectNode o = JSON.createObjectNode().put("index", c.index());
        if (c.opens()) {
            o.put("id", c.id()).put("type", "function");
            o.putObject("function").put("name", c.name()).put("arguments", c.arguments());
        } else {
            o.putObject("function").put("arguments", c.arguments());
        }
        return o;
    }

    static ObjectNode toolCallJson(ToolCall c) {
        ObjectNode o = JSON.createObjectNode();
        o.put("id", c.id()).put("type", "function");
        o.putObject("function").put("name", c.name()).put("arguments", c.arguments());
        return o;
    }

    /** A token as logprobs name it: its text, or {@code token_id:N} with vLLM's return_tokens_as_token_ids. */
    String tokenKey(int id, boolean asIds) {
        return asIds ? "token_id:" + id : service.tokenizer().decode(new int[]{id}, false);
    }

    ObjectNode logprobsJson(List<TokenEvent> events, int top, boolean asIds) {
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode content = lp.putArray("content");
        for (TokenEvent e : events) {
            if (e.token() < 0) {
                continue;
            }
            ObjectNode t = content.addObject();
            String text = service.tokenizer().decode(new int[]{e.token()}, false);
            t.put("token", asIds ? "token_id:" + e.token() : text).put("logprob", e.logprob());
            ArrayNode bytes = t.putArray("bytes");
            for (byte b : text.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
                bytes.add(b & 0xff);
            }
            ArrayNode alts = t.putArray("top_logprobs");
            for (int k = 0; k < Math.min(top, e.topIds().length); k++) {
                String alt = service.tokenizer().decode(new int[]{e.topIds()[k]}, false);
                ObjectNode a = alts.addObject().put("token", asIds ? "token_id:" + e.topIds()[k] : alt).put("logprob", e.topLogprobs()[k]);
                ArrayNode ab = a.putArray("bytes");
                for (byte b : alt.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
                    ab.add(b & 0xff);
                }
            }
        }
        return lp;
    }

    static ObjectNode usage(int prompt, int completion, int cached) {
        ObjectNode u = JSON.createObjectNode();
        u.put("prompt_tokens", prompt).put("completion_tokens", completion).put("total_tokens", prompt + completion);
        u.putObject("prompt_tokens_details").put("cached_tokens", cached);
        return u;
    }

    public static String sse(JsonNode data) {
        return "data: " + data.toString() + "\n\n";
    }
}

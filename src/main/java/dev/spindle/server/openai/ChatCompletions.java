package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.chat.JsonValues;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReasoningParser;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.grammar.GrammarConstraint;
import dev.spindle.engine.grammar.Recognizer;
import dev.spindle.engine.grammar.ToolCallRecognizer;
import dev.spindle.engine.grammar.Schema;
import dev.spindle.server.ModelService;
import dev.spindle.server.TokenStreams;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
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
    static final ObjectMapper JSON = new ObjectMapper();
    private final ModelService service;
    private final TokenStreams streams;

    public ChatCompletions(ModelService service, TokenStreams streams) {
        this.service = service;
        this.streams = streams;
    }

    /** A prepared request: prompt ids and how each choice's text is read. */
    record Prepared(String id, long created, int[] prompt, GenerationRequest gen, boolean inReasoning, ToolSchemas tools) {
    }

    Prepared prepare(JsonNode body) {
        if (!body.path("messages").isArray() || body.path("messages").isEmpty()) {
            throw ApiException.badRequest("messages must be a non-empty list", "messages");
        }
        Schema schema = responseSchema(body.get("response_format"));
        JsonNode choice = body.get("tool_choice");
        String toolChoice = choice == null || choice.isNull() ? "auto" : choice.isTextual() ? choice.asText() : "named";
        if (!List.of("auto", "none", "required", "named").contains(toolChoice)) {
            throw ApiException.badRequest("tool_choice must be 'auto', 'none', 'required' or name a function, not '" + toolChoice + "'", "tool_choice");
        }
        Recognizer forcedCalls = toolChoice.equals("required") || toolChoice.equals("named") ? toolGrammar(body, choice, toolChoice) : null;
        GenerationRequest gen = GenerationRequest.parse(body, service.generationDefaults(), service.config().defaultMaxTokens(), true);
        List<?> messages = (List<?>) JsonValues.toValue(body.get("messages"));
        List<?> tools = body.path("tools").isArray() && !body.path("tools").isEmpty() ? (List<?>) JsonValues.toValue(body.get("tools")) : null;
        Map<String, Object> kwargs = new LinkedHashMap<>();
        if (body.path("chat_template_kwargs").isObject()) {
            @SuppressWarnings("unchecked")
            Map<String, Object> kv = (Map<String, Object>) JsonValues.toValue(body.get("chat_template_kwargs"));
            kwargs.putAll(kv);
        }
        kwargs.putIfAbsent("add_generation_prompt", true);
        String prompt;
        try {
            prompt = service.template().render(messages, tools, kwargs);
        } catch (ChatTemplateException e) {
            throw ApiException.badRequest(e.getMessage(), "messages");
        }
        int[] ids = service.tokenizer().encode(prompt);
        gen = gen.fitToContext(ids.length, service.modelConfig().maxPositions());
        try {
            service.engine().validate(ids, gen.params());
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), "max_tokens");
        }
        boolean inReasoning = ReasoningParser.promptOpensReasoning(prompt);
        int thinkEnd = inReasoning ? service.tokenizer().addedTokenId("</think>") : -1;
        if (schema != null && forcedCalls != null) {
            throw ApiException.badRequest("response_format and a forced tool_choice cannot be combined", "response_format");
        }
        if (schema != null) {
            gen = gen.withParams(gen.params().withConstraint(() -> new GrammarConstraint(schema, service.tokenTexts(), service.eosIds(), thinkEnd)));
        } else if (forcedCalls != null) {
            gen = gen.withParams(gen.params().withConstraint(() -> new GrammarConstraint(forcedCalls, service.tokenTexts(), service.eosIds(), thinkEnd)));
        }
        return new Prepared("chatcmpl-" + UUID.randomUUID().toString().replace("-", ""), System.currentTimeMillis() / 1000, ids, gen,
                inReasoning, toolChoice.equals("none") || schema != null ? ToolSchemas.of(null) : ToolSchemas.of(tools));
    }

    /**
     * tool_choice "required" (one or more calls to the offered functions) or a named
     * function (exactly one call to it), as a grammar over Nanbeige's XML call format:
     * names, parameter names and JSON-typed values are enforced, string values are free text.
     */
    static Recognizer toolGrammar(JsonNode body, JsonNode choice, String mode) {
        JsonNode tools = body.get("tools");
        if (tools == null || !tools.isArray() || tools.isEmpty()) {
            throw ApiException.badRequest("tool_choice '" + mode + "' needs tools", "tool_choice");
        }
        String only = mode.equals("named") ? choice.path("function").path("name").asText(null) : null;
        if (mode.equals("named") && only == null) {
            throw ApiException.badRequest("tool_choice must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
        }
        Map<String, ToolCallRecognizer.Function> functions = new LinkedHashMap<>();
        for (JsonNode t : tools) {
            JsonNode fn = t.has("function") ? t.get("function") : t;
            String name = fn.path("name").asText();
            if (only != null && !only.equals(name)) {
                continue;
            }
            Map<String, Schema> params = new LinkedHashMap<>();
            Set<String> strings = new HashSet<>();
            List<String> required = new ArrayList<>();
            JsonNode ps = fn.path("parameters");
            ps.path("properties").fields().forEachRemaining(e -> {
                JsonNode type = e.getValue().path("type");
                boolean isString = "string".equals(type.asText()) || (type.isMissingNode() && e.getValue().path("enum").isArray());
                try {
                    params.put(e.getKey(), isString ? Schema.any() : Schema.compile(e.getValue()));
                } catch (IllegalArgumentException ex) {
                    throw ApiException.badRequest("tool '" + name + "', parameter '" + e.getKey() + "': " + ex.getMessage(), "tools");
                }
                if (isString) {
                    strings.add(e.getKey());
                }
            });
            ps.path("required").forEach(r -> required.add(r.asText()));
            functions.put(name, new ToolCallRecognizer.Function(params, strings, required));
        }
        if (functions.isEmpty()) {
            throw ApiException.badRequest("tool_choice names '" + only + "', which is not among the tools", "tool_choice");
        }
        return ToolCallRecognizer.start(functions, mode.equals("required"));
    }

    /**
     * response_format: text (null), json_object (any object) or json_schema (compiled;
     * an unsupported keyword is a 400 naming it). The reply after the reasoning is then
     * constrained token by token.
     */
    static Schema responseSchema(JsonNode rf) {
        if (rf == null || rf.isNull()) {
            return null;
        }
        String type = rf.path("type").asText("text");
        return switch (type) {
            case "text" -> null;
            case "json_object" -> Schema.anyObject();
            case "json_schema" -> {
                JsonNode js = rf.path("json_schema");
                if (!js.has("schema")) {
                    throw ApiException.badRequest("response_format.json_schema.schema is required", "response_format");
                }
                try {
                    yield Schema.compile(js.get("schema"));
                } catch (IllegalArgumentException e) {
                    throw ApiException.badRequest(e.getMessage(), "response_format");
                }
            }
            default -> throw ApiException.badRequest("response_format type must be text, json_object or json_schema, not '" + type + "'", "response_format");
        };
    }

    private ChoiceText choiceText(Prepared p) {
        Set<Integer> ends = new HashSet<>(service.eosIds());
        ends.addAll(p.gen().params().stopTokenIds());
        return new ChoiceText(service.tokenizer(), p.gen().skipSpecialTokens(), p.gen().stops(),
                new ReplyParser(p.inReasoning(), p.tools(), () -> "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24)), ends);
    }

    /** The SSE stream: one chunk per step with text, a final chunk with finish_reason, usage if asked, then [DONE]. */
    public Multi<String> stream(Prepared p) {
        List<Multi<String>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        int[] cached = new int[1];
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            int[] toolIndex = {0};
            boolean[] first = {true};
            // items after the choice ends (a stop string was found) cancel the request upstream
            choices.add(streams.generate(p.prompt(), p.gen().forChoice(i)).select().first(e -> !text.finished())
                    .onItem().transformToMultiAndConcatenate(e -> {
                ParsedDelta d = text.next(e);
                completion[index] = text.completionTokens;
                cached[0] = text.cachedTokens;
                List<String> out = new ArrayList<>();
                ObjectNode delta = JSON.createObjectNode();
                if (first[0]) {
                    delta.put("role", "assistant");
                    first[0] = false;
                }
                if (!d.reasoning().isEmpty()) {
                    delta.put("reasoning_content", d.reasoning());
                }
                if (!d.content().isEmpty()) {
                    delta.put("content", d.content());
                }
                if (!d.toolCalls().isEmpty()) {
                    ArrayNode calls = delta.putArray("tool_calls");
                    for (ToolCall c : d.toolCalls()) {
                        calls.add(toolCallJson(c).put("index", toolIndex[0]++));
                    }
                }
                ObjectNode logprobs = p.gen().logprobs() ? logprobsJson(List.of(e), p.gen().topLogprobs()) : null;
                if (!delta.isEmpty() || text.finished() || logprobs != null) {
                    out.add(sse(chunk(p, index, delta, text.finished() ? text.finishReason : null, logprobs)));
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

    /** The whole reply as one chat.completion object. */
    public Uni<ObjectNode> complete(Prepared p) {
        List<Uni<ObjectNode>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        int[] cached = new int[1];
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            List<ParsedDelta> parts = new ArrayList<>();
            List<TokenEvent> events = new ArrayList<>();
            choices.add(streams.generate(p.prompt(), p.gen().forChoice(i))
                    .select().first(e -> !text.finished())
                    .onItem().invoke(e -> {
                        parts.add(text.next(e));
                        events.add(e);
                    })
                    .collect().last()
                    .map(last -> {
                        ParsedDelta all = ReplyParser.merge(parts);
                        completion[index] = text.completionTokens;
                        cached[0] = text.cachedTokens;
                        ObjectNode message = JSON.createObjectNode().put("role", "assistant");
                        message.put("content", all.content().isEmpty() && !all.toolCalls().isEmpty() ? null : all.content());
                        if (!all.reasoning().isEmpty()) {
                            message.put("reasoning_content", all.reasoning());
                        }
                        if (!all.toolCalls().isEmpty()) {
                            ArrayNode calls = message.putArray("tool_calls");
                            all.toolCalls().forEach(c -> calls.add(toolCallJson(c)));
                        }
                        ObjectNode c = JSON.createObjectNode().put("index", index);
                        c.set("message", message);
                        c.set("logprobs", p.gen().logprobs() ? logprobsJson(events, p.gen().topLogprobs()) : null);
                        c.put("finish_reason", text.finishReason == null ? "stop" : text.finishReason);
                        return c;
                    }));
        }
        return Uni.join().all(choices).andFailFast().map(list -> {
            ObjectNode r = JSON.createObjectNode();
            r.put("id", p.id()).put("object", "chat.completion").put("created", p.created()).put("model", service.servedName());
            ArrayNode arr = r.putArray("choices");
            list.forEach(arr::add);
            r.set("usage", usage(p.prompt().length, sum(completion), cached[0]));
            return r;
        });
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

    static ObjectNode toolCallJson(ToolCall c) {
        ObjectNode o = JSON.createObjectNode();
        o.put("id", c.id()).put("type", "function");
        o.putObject("function").put("name", c.name()).put("arguments", c.arguments());
        return o;
    }

    ObjectNode logprobsJson(List<TokenEvent> events, int top) {
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode content = lp.putArray("content");
        for (TokenEvent e : events) {
            ObjectNode t = content.addObject();
            String text = service.tokenizer().decode(new int[]{e.token()}, false);
            t.put("token", text).put("logprob", e.logprob());
            ArrayNode bytes = t.putArray("bytes");
            for (byte b : text.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
                bytes.add(b & 0xff);
            }
            ArrayNode alts = t.putArray("top_logprobs");
            for (int k = 0; k < Math.min(top, e.topIds().length); k++) {
                alts.addObject().put("token", service.tokenizer().decode(new int[]{e.topIds()[k]}, false)).put("logprob", e.topLogprobs()[k]);
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

    static String sse(JsonNode data) {
        return "data: " + data.toString() + "\n\n";
    }
}

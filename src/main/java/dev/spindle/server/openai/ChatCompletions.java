package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.grammar.EitherRecognizer;
import dev.spindle.engine.grammar.GrammarConstraint;
import dev.spindle.engine.grammar.JsonRecognizer;
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
        List<?> messages = ChatMessages.parse(body.get("messages"), "messages");
        List<?> tools = ChatMessages.tools(body.get("tools"), "tools");
        Schema schema = responseSchema(body.get("response_format"));
        String toolChoice = toolChoice(body.get("tool_choice"));
        boolean parallel = Fields.bool(body, "parallel_tool_calls", true);
        Map<String, Object> kwargs = ChatMessages.templateKwargs(body);
        kwargs.putIfAbsent("add_generation_prompt", true);
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
        ToolSchemas toolSchemas = ToolSchemas.of(offered);
        Recognizer grammar = null;
        // names the XML format cannot hold: a forced call is refused, under auto the calls are parsed but not constrained
        boolean writable = offered != null && ToolCallRecognizer.unwritableName(toolSchemas.functions()) == null;
        if (forced) {
            Map<String, Schema> functions = strictFunctions(tools, toolChoice);
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
        GenerationRequest gen = GenerationRequest.parse(body, service.generationDefaults(), service.config().defaultMaxTokens(), true,
                service.modelConfig().vocabSize());
        String prompt;
        try {
            prompt = service.template().render(messages, offered, kwargs);
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
        dev.spindle.chat.ChatFormat format = service.chatFormat();
        boolean inReasoning = format.promptOpensReasoning(prompt);
        int thinkEnd = inReasoning ? format.reasoningEndId(service.tokenizer()) : -1;
        if (grammar != null) {
            Recognizer start = grammar;
            gen = gen.withParams(gen.params().withConstraint(() -> new GrammarConstraint(start, service.tokenTexts(), service.eosIds(), thinkEnd)));
        }
        return new Prepared("chatcmpl-" + UUID.randomUUID().toString().replace("-", ""), System.currentTimeMillis() / 1000, ids, gen,
                inReasoning, toolSchemas);
    }

    /** "auto", "none", "required", or "function:NAME" for a named function. */
    static String toolChoice(JsonNode choice) {
        if (choice == null || choice.isNull()) {
            return "auto";
        }
        if (choice.isTextual()) {
            String c = choice.asText();
            if (!List.of("auto", "none", "required").contains(c)) {
                throw ApiException.badRequest("tool_choice must be 'auto', 'none', 'required' or name a function, not '" + c + "'", "tool_choice");
            }
            return c;
        }
        String name = choice.isObject() ? choice.path("function").path("name").asText("") : "";
        if (name.isEmpty() || (choice.has("type") && !"function".equals(choice.path("type").asText()))) {
            throw ApiException.badRequest("tool_choice must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
        }
        return "function:" + name;
    }

    /**
     * The functions a forced call may use (all of them for "required", the named one otherwise), their
     * parameter schemas compiled strictly: a keyword constrained decoding cannot enforce is a 400 naming it.
     */
    static Map<String, Schema> strictFunctions(List<?> tools, String choice) {
        String only = choice.startsWith("function:") ? choice.substring("function:".length()) : null;
        Map<String, Schema> functions = new LinkedHashMap<>();
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = JSON.valueToTree(tools.get(i));
            JsonNode fn = t.has("function") ? t.get("function") : t;
            String name = fn.path("name").asText();
            if (only != null && !only.equals(name)) {
                continue;
            }
            try {
                functions.put(name, fn.hasNonNull("parameters") ? Schema.compile(fn.get("parameters")) : Schema.anyObject());
            } catch (IllegalArgumentException e) {
                throw ApiException.badRequest("tool '" + name + "' parameters: " + e.getMessage(), "tools[" + i + "]." + (t.has("function") ? "function." : "") + "parameters");
            }
        }
        if (functions.isEmpty()) {
            throw ApiException.badRequest("tool_choice names '" + only + "', which is not among the tools", "tool_choice");
        }
        return functions;
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
        if (!rf.isObject() || (rf.has("type") && !rf.get("type").isTextual())) {
            throw ApiException.badRequest("response_format must be an object with a type (text, json_object or json_schema), got " + rf, "response_format");
        }
        String type = rf.path("type").asText("text");
        return switch (type) {
            case "text" -> null;
            case "json_object" -> Schema.anyObject();
            case "json_schema" -> {
                JsonNode js = rf.path("json_schema");
                if (!js.path("schema").isObject()) {
                    throw ApiException.badRequest("response_format.json_schema.schema is required and must be a JSON schema object", "response_format");
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
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            int[] toolIndex = {0};
            boolean[] first = {true};
            // items after the choice ends (a stop string was found) cancel the request upstream
            choices.add(generations.get(i).select().first(e -> !text.finished())
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
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            List<ParsedDelta> parts = new ArrayList<>();
            List<TokenEvent> events = new ArrayList<>();
            choices.add(generations.get(i)
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

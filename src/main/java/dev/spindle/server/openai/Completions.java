package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.engine.TokenEvent;
import dev.spindle.server.ModelService;
import dev.spindle.server.TokenStreams;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChoiceText;
import dev.spindle.server.pipeline.Fields;
import dev.spindle.server.pipeline.GenerationRequest;
import dev.spindle.server.pipeline.Json;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;

import static dev.spindle.server.pipeline.Json.JSON;

/** POST /v1/completions: a raw prompt (text or token ids), no template. */
@ApplicationScoped
public class Completions {
    private final ModelService service;
    private final TokenStreams streams;

    private final ChatPipeline pipeline;
    private final ChatCompletions chat;

    public Completions(ModelService service, TokenStreams streams, ChatPipeline pipeline, ChatCompletions chat) {
        this.service = service;
        this.streams = streams;
        this.pipeline = pipeline;
        this.chat = chat;
    }

    /** One request: one or more prompts (each with its n choices; choice index = prompt * n + choice). */
    public record Prepared(String id, long created, List<int[]> prompts, List<String> promptTexts, GenerationRequest gen, boolean echo) {
    }

    public Prepared prepare(JsonNode body) {
        List<int[]> prompts = new ArrayList<>();
        List<String> texts = new ArrayList<>();
        JsonNode p = body.get("prompt");
        int vocab = service.modelConfig().vocabSize();
        if (p != null && p.isTextual()) {
            texts.add(p.asText());
            prompts.add(service.tokenizer().encodeWithSpecialTokens(p.asText()));
        } else if (p != null && p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber()) {
            prompts.add(ids(p, "prompt", vocab));
            texts.add(service.tokenizer().decode(prompts.getFirst(), false));
        } else if (p != null && p.isArray() && !p.isEmpty()) {
            for (int i = 0; i < p.size(); i++) { // a list of prompts: strings or lists of token ids
                JsonNode one = p.get(i);
                if (one.isTextual()) {
                    texts.add(one.asText());
                    prompts.add(service.tokenizer().encodeWithSpecialTokens(one.asText()));
                } else if (one.isArray() && !one.isEmpty()) {
                    prompts.add(ids(one, "prompt[" + i + "]", vocab));
                    texts.add(service.tokenizer().decode(prompts.getLast(), false));
                } else {
                    throw ApiException.badRequest("prompt[" + i + "] must be a string or a non-empty list of token ids, got " + one, "prompt[" + i + "]");
                }
            }
        } else {
            throw ApiException.badRequest("prompt must be a string, a list of token ids, or a list of either", "prompt");
        }
        GenerationRequest gen = GenerationRequest.parse(body, pipeline.generationContext(), false);
        if (prompts.size() * gen.n() > service.engine().maxQueued()) {
            throw ApiException.badRequest(prompts.size() + " prompts x n = " + gen.n() + " are " + prompts.size() * gen.n()
                    + " requests, more than this server's batch slots and max-waiting-requests hold (" + service.engine().maxQueued() + ")", "prompt");
        }
        boolean echo = Fields.bool(body, "echo", false);
        int context = service.modelConfig().maxPositions();
        GenerationRequest fitted = null;
        for (int i = 0; i < prompts.size(); i++) {
            int[] ids = gen.truncate(prompts.get(i), context);
            prompts.set(i, ids);
            GenerationRequest g = gen.fitToContext(ids.length, context);
            fitted = fitted == null || g.params().maxTokens() < fitted.params().maxTokens() ? g : fitted;
            try {
                service.engine().validate(ids, g.params());
            } catch (IllegalArgumentException e) {
                throw ApiException.badRequest(e.getMessage(), "max_tokens");
            }
        }
        String requestId = Fields.string(body, "request_id", UUID.randomUUID().toString().replace("-", ""));
        return new Prepared("cmpl-" + requestId, System.currentTimeMillis() / 1000, prompts, texts, fitted, echo);
    }

    private static int[] ids(JsonNode list, String path, int vocab) {
        int[] ids = new int[list.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = (int) Fields.integerValue(list.get(i), path + "[" + i + "]", 0, 0, vocab - 1);
        }
        return ids;
    }

    private ChoiceText choiceText(Prepared p) {
        Set<Integer> ends = new HashSet<>(service.modelConfig().eosTokenIds());
        ends.addAll(p.gen().params().stopTokenIds());
        return new ChoiceText(service.tokenizer(), p.gen(), null, ends, -1);
    }

    /** Every prompt's choices, in choice-index order (prompt-major), submitted all or none. */
    private List<Multi<TokenEvent>> generate(Prepared p) {
        List<Multi<TokenEvent>> all = new ArrayList<>();
        try {
            for (int[] prompt : p.prompts()) {
                all.addAll(streams.generate(prompt, p.gen().choices()));
            }
        } catch (RuntimeException e) {
            all.forEach(m -> m.subscribe().with(x -> { }, err -> { }).cancel()); // cancels what was submitted
            throw e;
        }
        return all;
    }

    /** One choice of a request: its index (prompt-major), its prompt's, its text being read and its tokens. */
    private record Choice(int index, int promptIndex, ChoiceText text, Multi<TokenEvent> tokens) {
    }

    /** Every choice of every prompt, submitted all or none ({@link #generate}), each read until its text ends. */
    private List<Choice> choices(Prepared p) {
        List<Multi<TokenEvent>> generations = generate(p);
        List<Choice> out = new ArrayList<>();
        for (int i = 0; i < generations.size(); i++) {
            ChoiceText text = choiceText(p);
            out.add(new Choice(i, i / p.gen().n(), text, generations.get(i).select().first(e -> !text.finished())));
        }
        return out;
    }

    public Multi<String> stream(Prepared p) {
        List<Multi<String>> choices = new ArrayList<>();
        int[] completion = new int[p.prompts().size() * p.gen().n()];
        for (Choice ch : choices(p)) {
            int index = ch.index(), promptIndex = ch.promptIndex();
            ChoiceText text = ch.text();
            boolean[] first = {true};
            choices.add(ch.tokens().map(e -> {
                ParsedDelta d = text.next(e);
                completion[index] = text.completionTokens();
                String t = (first[0] && p.echo() ? p.promptTexts().get(promptIndex) : "") + d.content();
                ObjectNode chunk = choiceJson(p, index, t, text.finished() ? text.finishReason() : null,
                        p.gen().logprobs() ? logprobs(p, promptIndex, List.of(e), p.gen().topLogprobs(), first[0]) : null).put("object", "text_completion");
                if (text.finished()) {
                    ChatCompletions.putStopReason((ObjectNode) chunk.get("choices").get(0), text.stopReason());
                }
                if (first[0] && p.gen().promptLogprobs() >= 0 && e.promptLogprobs() != null) {
                    ((ObjectNode) chunk.get("choices").get(0)).set("prompt_logprobs",
                            chat.promptLogprobsJson(p.prompts().get(promptIndex), e.promptLogprobs(), p.gen().promptLogprobs()));
                }
                if (p.gen().continuousUsage()) {
                    chunk.set("usage", ChatCompletions.usage(p.prompts().get(promptIndex).length, text.completionTokens(), text.cachedTokens()));
                }
                first[0] = false;
                return Json.sse(chunk);
            }));
        }
        return Multi.createBy().merging().streams(choices).onCompletion().switchTo(() -> {
            List<String> tail = new ArrayList<>();
            if (p.gen().includeUsage()) {
                ObjectNode u = base(p);
                u.putArray("choices");
                u.set("usage", ChatCompletions.usage(promptTokens(p), java.util.Arrays.stream(completion).sum(), 0));
                tail.add(Json.sse(u));
            }
            tail.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(tail);
        });
    }

    private int promptTokens(Prepared p) {
        return p.prompts().stream().mapToInt(x -> x.length).sum() * p.gen().n();
    }

    public Uni<ObjectNode> complete(Prepared p) {
        List<Uni<ObjectNode>> choices = new ArrayList<>();
        int[] completion = new int[p.prompts().size() * p.gen().n()];
        for (Choice ch : choices(p)) {
            int index = ch.index(), promptIndex = ch.promptIndex();
            ChoiceText text = ch.text();
            StringBuilder out = new StringBuilder(p.echo() ? p.promptTexts().get(promptIndex) : "");
            List<TokenEvent> events = new ArrayList<>();
            choices.add(ch.tokens()
                    .onItem().invoke(e -> {
                        out.append(text.next(e).content());
                        events.add(e);
                    }).collect().last().map(x -> {
                        completion[index] = text.completionTokens();
                        ObjectNode c = JSON.createObjectNode().put("index", index).put("text", out.toString());
                        c.set("logprobs", p.gen().logprobs() ? logprobs(p, promptIndex, events, p.gen().topLogprobs(), true) : null);
                        c.put("finish_reason", text.finishReason() == null ? "stop" : text.finishReason());
                        ChatCompletions.putStopReason(c, text.stopReason());
                        TokenEvent.PromptLogprobs pl = events.isEmpty() ? null : events.getFirst().promptLogprobs();
                        if (p.gen().promptLogprobs() >= 0 && pl != null) {
                            c.set("prompt_logprobs", chat.promptLogprobsJson(p.prompts().get(promptIndex), pl, p.gen().promptLogprobs()));
                        }
                        return c;
                    }));
        }
        return Uni.join().all(choices).andFailFast().map(list -> {
            ObjectNode r = base(p);
            ArrayNode arr = r.putArray("choices");
            list.forEach(arr::add);
            r.set("usage", ChatCompletions.usage(promptTokens(p), java.util.Arrays.stream(completion).sum(), 0));
            return r;
        });
    }

    private ObjectNode base(Prepared p) {
        return ChatCompletions.header(p.id(), "text_completion", p.created(), service.servedName());
    }

    private ObjectNode choiceJson(Prepared p, int index, String text, String finish, ObjectNode logprobs) {
        ObjectNode r = base(p);
        ChatCompletions.choice(r, index, "text", TextNode.valueOf(text), finish, logprobs);
        return r;
    }

    /**
     * The legacy completions logprobs object: tokens, token_logprobs, top_logprobs; with
     * echo, the prompt's own tokens come first (the first has no logprob: null). With vLLM's
     * return_tokens_as_token_ids every token is {@code token_id:N} (two ids can decode to the
     * same text, which would collide as keys of top_logprobs).
     */
    private ObjectNode logprobs(Prepared p, int promptIndex, List<TokenEvent> events, int top, boolean withPrompt) {
        boolean asIds = p.gen().tokenIdsAsKeys();
        int[] prompt = p.prompts().get(promptIndex);
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode tokens = lp.putArray("tokens"), lps = lp.putArray("token_logprobs"), tops = lp.putArray("top_logprobs");
        for (TokenEvent e : events) {
            TokenEvent.PromptLogprobs pl = e.promptLogprobs();
            if (pl == null || !p.echo() || !withPrompt) {
                continue;
            }
            for (int i = 0; i < prompt.length; i++) {
                tokens.add(tokenKey(prompt[i], asIds));
                if (i == 0) {
                    lps.addNull();
                    tops.addNull();
                    continue;
                }
                lps.add(pl.logprobs()[i]);
                ObjectNode alt = tops.addObject();
                for (int k = 0; k < Math.min(top, pl.topIds()[i].length); k++) {
                    alt.put(tokenKey(pl.topIds()[i][k], asIds), pl.topLogprobs()[i][k]);
                }
            }
        }
        for (TokenEvent e : events) {
            if (e.token() < 0) {
                continue;
            }
            tokens.add(tokenKey(e.token(), asIds));
            lps.add(e.logprob());
            ObjectNode alt = tops.addObject();
            for (int k = 0; k < Math.min(top, e.topIds().length); k++) {
                alt.put(tokenKey(e.topIds()[k], asIds), e.topLogprobs()[k]);
            }
        }
        return lp;
    }

    /** A token as logprobs name it: its text, or {@code token_id:N} with vLLM's return_tokens_as_token_ids. */
    private String tokenKey(int id, boolean asIds) {
        return asIds ? "token_id:" + id : service.tokenizer().decode(new int[]{id}, false);
    }
}

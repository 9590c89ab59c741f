package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.engine.TokenEvent;
import dev.spindle.server.ModelService;
import dev.spindle.server.TokenStreams;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;

import static dev.spindle.server.openai.ChatCompletions.JSON;

/** POST /v1/completions: a raw prompt (text or token ids), no template. */
@ApplicationScoped
public class Completions {
    private final ModelService service;
    private final TokenStreams streams;

    public Completions(ModelService service, TokenStreams streams) {
        this.service = service;
        this.streams = streams;
    }

    record Prepared(String id, long created, int[] prompt, String promptText, GenerationRequest gen, boolean echo) {
    }

    Prepared prepare(JsonNode body) {
        JsonNode p = body.get("prompt");
        int[] ids;
        String text;
        if (p != null && p.isTextual()) {
            text = p.asText();
            ids = service.tokenizer().encodeWithSpecialTokens(text);
        } else if (p != null && p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber()) {
            ids = new int[p.size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = (int) Fields.integerValue(p.get(i), "prompt[" + i + "]", 0, 0, service.modelConfig().vocabSize() - 1);
            }
            text = service.tokenizer().decode(ids, false);
        } else if (p != null && p.isArray() && p.size() == 1 && p.get(0).isTextual()) {
            text = p.get(0).asText();
            ids = service.tokenizer().encodeWithSpecialTokens(text);
        } else {
            throw ApiException.badRequest("prompt must be a string or a list of token ids (one prompt per request)", "prompt");
        }
        GenerationRequest gen = GenerationRequest.parse(body, service.generationDefaults(), service.config().defaultMaxTokens(), false,
                service.modelConfig().vocabSize());
        boolean echo = Fields.bool(body, "echo", false);
        gen = gen.fitToContext(ids.length, service.modelConfig().maxPositions());
        try {
            service.engine().validate(ids, gen.params());
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), "max_tokens");
        }
        return new Prepared("cmpl-" + UUID.randomUUID().toString().replace("-", ""), System.currentTimeMillis() / 1000, ids, text, gen, echo);
    }

    private ChoiceText choiceText(Prepared p) {
        Set<Integer> ends = new HashSet<>(service.modelConfig().eosTokenIds());
        ends.addAll(p.gen().params().stopTokenIds());
        return new ChoiceText(service.tokenizer(), p.gen().skipSpecialTokens(), p.gen().stops(), null, ends);
    }

    public Multi<String> stream(Prepared p) {
        List<Multi<String>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            boolean[] first = {true};
            choices.add(generations.get(i).select().first(e -> !text.finished()).map(e -> {
                ParsedDelta d = text.next(e);
                completion[index] = text.completionTokens;
                String t = (first[0] && p.echo() ? p.promptText() : "") + d.content();
                first[0] = false;
                return ChatCompletions.sse(choiceJson(p, index, t, text.finished() ? text.finishReason : null,
                        p.gen().logprobs() ? logprobs(p, List.of(e), p.gen().topLogprobs()) : null).put("object", "text_completion"));
            }));
        }
        return Multi.createBy().merging().streams(choices).onCompletion().switchTo(() -> {
            List<String> tail = new ArrayList<>();
            if (p.gen().includeUsage()) {
                ObjectNode u = base(p);
                u.putArray("choices");
                u.set("usage", ChatCompletions.usage(p.prompt().length, java.util.Arrays.stream(completion).sum(), 0));
                tail.add(ChatCompletions.sse(u));
            }
            tail.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(tail);
        });
    }

    public Uni<ObjectNode> complete(Prepared p) {
        List<Uni<ObjectNode>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        List<Multi<TokenEvent>> generations = streams.generate(p.prompt(), p.gen().choices());
        for (int i = 0; i < p.gen().n(); i++) {
            int index = i;
            ChoiceText text = choiceText(p);
            StringBuilder out = new StringBuilder(p.echo() ? p.promptText() : "");
            List<TokenEvent> events = new ArrayList<>();
            choices.add(generations.get(i).select().first(e -> !text.finished())
                    .onItem().invoke(e -> {
                        out.append(text.next(e).content());
                        events.add(e);
                    }).collect().last().map(x -> {
                        completion[index] = text.completionTokens;
                        ObjectNode c = JSON.createObjectNode().put("index", index).put("text", out.toString());
                        c.set("logprobs", p.gen().logprobs() ? logprobs(p, events, p.gen().topLogprobs()) : null);
                        c.put("finish_reason", text.finishReason == null ? "stop" : text.finishReason);
                        return c;
                    }));
        }
        return Uni.join().all(choices).andFailFast().map(list -> {
            ObjectNode r = base(p);
            ArrayNode arr = r.putArray("choices");
            list.forEach(arr::add);
            r.set("usage", ChatCompletions.usage(p.prompt().length, java.util.Arrays.stream(completion).sum(), 0));
            return r;
        });
    }

    private ObjectNode base(Prepared p) {
        ObjectNode r = JSON.createObjectNode();
        r.put("id", p.id()).put("object", "text_completion").put("created", p.created()).put("model", service.servedName());
        return r;
    }

    private ObjectNode choiceJson(Prepared p, int index, String text, String finish, ObjectNode logprobs) {
        ObjectNode r = base(p);
        ObjectNode c = r.putArray("choices").addObject();
        c.put("index", index).put("text", text);
        c.set("logprobs", logprobs);
        c.put("finish_reason", finish);
        return r;
    }

    /**
     * The legacy completions logprobs object: tokens, token_logprobs, top_logprobs; with
     * echo, the prompt's own tokens come first (the first has no logprob: null).
     */
    private ObjectNode logprobs(Prepared p, List<TokenEvent> events, int top) {
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode tokens = lp.putArray("tokens"), lps = lp.putArray("token_logprobs"), tops = lp.putArray("top_logprobs");
        for (TokenEvent e : events) {
            TokenEvent.PromptLogprobs pl = e.promptLogprobs();
            if (pl == null || !p.echo()) {
                continue;
            }
            for (int i = 0; i < p.prompt().length; i++) {
                tokens.add(service.tokenizer().decode(new int[]{p.prompt()[i]}, false));
                if (i == 0) {
                    lps.addNull();
                    tops.addNull();
                    continue;
                }
                lps.add(pl.logprobs()[i]);
                ObjectNode alt = tops.addObject();
                for (int k = 0; k < Math.min(top, pl.topIds()[i].length); k++) {
                    alt.put(service.tokenizer().decode(new int[]{pl.topIds()[i][k]}, false), pl.topLogprobs()[i][k]);
                }
            }
        }
        for (TokenEvent e : events) {
            if (e.token() < 0) {
                continue;
            }
            tokens.add(service.tokenizer().decode(new int[]{e.token()}, false));
            lps.add(e.logprob());
            ObjectNode alt = tops.addObject();
            for (int k = 0; k < Math.min(top, e.topIds().length); k++) {
                alt.put(service.tokenizer().decode(new int[]{e.topIds()[k]}, false), e.topLogprobs()[k]);
            }
        }
        return lp;
    }
}

package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.engine.SamplingParams;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The sampling and stopping fields shared by /v1/chat/completions and /v1/completions,
 * read from the request JSON with the model's generation_config.json as defaults.
 */
record GenerationRequest(SamplingParams params, List<String> stops, int n, boolean stream, boolean includeUsage,
                         boolean logprobs, int topLogprobs, boolean skipSpecialTokens, boolean maxTokensGiven) {

    /**
     * Fits max_tokens to the context: a request that asked for more than the context
     * leaves is refused (as vLLM does); one that gave none gets what is left, up to the
     * server's default.
     */
    GenerationRequest fitToContext(int promptTokens, int contextTokens) {
        int left = contextTokens - promptTokens;
        if (left <= 0) {
            throw ApiException.badRequest("the prompt has " + promptTokens + " tokens; the model's context is " + contextTokens, "messages");
        }
        if (maxTokensGiven && params.maxTokens() > left) {
            throw ApiException.badRequest("this model's context is " + contextTokens + " tokens; the prompt has " + promptTokens
                    + " and max_tokens asks for " + params.maxTokens() + " more (at most " + left + " fit)", "max_tokens");
        }
        if (!maxTokensGiven && params.maxTokens() > left) {
            return new GenerationRequest(params.withMaxTokens(left), stops, n, stream, includeUsage, logprobs, topLogprobs, skipSpecialTokens, false);
        }
        return this;
    }

    /** @param vocab the model's vocabulary size (token ids in logit_bias and stop_token_ids are checked against it) */
    static GenerationRequest parse(JsonNode body, JsonNode defaults, int defaultMaxTokens, boolean chat, int vocab) {
        double temperature = Fields.number(body, "temperature",
                defaults.path("do_sample").asBoolean(true) ? defaults.path("temperature").asDouble(1.0) : 0.0, 0, 1000);
        double topP = Fields.number(body, "top_p", defaults.path("top_p").asDouble(1.0), Double.MIN_VALUE, 1);
        int topK = (int) Fields.integer(body, "top_k", defaults.path("top_k").asInt(0), -1, Integer.MAX_VALUE);
        if (topK < 0) {
            topK = 0; // vLLM's -1 means off
        }
        double minP = Fields.number(body, "min_p", defaults.path("min_p").asDouble(0.0), 0, 1);
        JsonNode seedNode = Fields.get(body, "seed");
        Long seed = seedNode == null ? null : Fields.integer(body, "seed", 0, Long.MIN_VALUE, Long.MAX_VALUE);
        int maxTokens = (int) Fields.integer(body, "max_tokens", defaultMaxTokens, 0, Integer.MAX_VALUE);
        maxTokens = (int) Fields.integer(body, "max_completion_tokens", maxTokens, 0, Integer.MAX_VALUE);
        int n = (int) Fields.integer(body, "n", 1, 1, 16);
        boolean logprobs;
        int top;
        if (chat) {
            logprobs = Fields.bool(body, "logprobs", false);
            top = (int) Fields.integer(body, "top_logprobs", 0, 0, 20);
            if (top > 0 && !logprobs) {
                throw ApiException.badRequest("top_logprobs needs logprobs: true", "top_logprobs");
            }
        } else {
            logprobs = Fields.get(body, "logprobs") != null;
            top = logprobs ? (int) Fields.integer(body, "logprobs", 0, 0, 20) : 0;
        }
        Map<Integer, Double> bias = new HashMap<>();
        JsonNode lb = Fields.object(body, "logit_bias");
        if (lb != null) {
            for (Iterator<Map.Entry<String, JsonNode>> it = lb.fields(); it.hasNext(); ) {
                var e = it.next();
                int id;
                try {
                    id = Integer.parseInt(e.getKey().trim());
                } catch (NumberFormatException ex) {
                    throw ApiException.badRequest("logit_bias keys must be token ids, got '" + e.getKey() + "'", "logit_bias");
                }
                if (id < 0 || id >= vocab) {
                    throw ApiException.badRequest("logit_bias token id " + id + " is outside the vocabulary [0, " + vocab + ")", "logit_bias");
                }
                if (!e.getValue().isNumber()) {
                    throw ApiException.badRequest("logit_bias values must be numbers, got " + e.getValue() + " for token " + id, "logit_bias");
                }
                bias.put(id, Math.max(-100, Math.min(100, e.getValue().asDouble())));
            }
        }
        List<String> stops = new ArrayList<>();
        JsonNode stop = Fields.get(body, "stop");
        if (stop != null && stop.isTextual()) {
            stops.add(stop.asText());
        } else if (stop != null && stop.isArray()) {
            for (JsonNode s : stop) {
                if (!s.isTextual()) {
                    throw ApiException.badRequest("stop must be a string or a list of strings, got " + stop, "stop");
                }
                stops.add(s.asText());
            }
        } else if (stop != null) {
            throw ApiException.badRequest("stop must be a string or a list of strings, got " + stop, "stop");
        }
        stops.removeIf(String::isEmpty);
        Set<Integer> stopIds = new HashSet<>();
        JsonNode ids = Fields.array(body, "stop_token_ids");
        if (ids != null) {
            for (int i = 0; i < ids.size(); i++) {
                stopIds.add((int) Fields.integerValue(ids.get(i), "stop_token_ids[" + i + "]", 0, 0, vocab - 1));
            }
        }
        double presence = Fields.number(body, "presence_penalty", 0, -2, 2);
        double frequency = Fields.number(body, "frequency_penalty", 0, -2, 2);
        double repetition = Fields.number(body, "repetition_penalty", defaults.path("repetition_penalty").asDouble(1.0), Double.MIN_VALUE, 100);
        boolean ignoreEos = Fields.bool(body, "ignore_eos", false);
        boolean echo = !chat && Fields.bool(body, "echo", false);
        boolean stream = Fields.bool(body, "stream", false);
        JsonNode so = Fields.object(body, "stream_options");
        boolean usage = stream && so != null && Fields.bool(so, "include_usage", false);
        boolean skipSpecial = Fields.bool(body, "skip_special_tokens", true);
        Fields.string(body, "user", null);
        SamplingParams params;
        try {
            params = new SamplingParams(temperature, topK, topP, minP, seed, presence, frequency, repetition, bias, maxTokens, stopIds,
                    ignoreEos, logprobs ? Math.max(0, top) : -1, null, logprobs && echo ? Math.max(0, top) : -1);
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), e.getMessage().startsWith("max_tokens") ? "max_tokens" : null);
        }
        boolean given = body.hasNonNull("max_tokens") || body.hasNonNull("max_completion_tokens");
        return new GenerationRequest(params, stops, n, stream, usage, logprobs, Math.max(0, top), skipSpecial, given);
    }

    GenerationRequest withParams(SamplingParams p) {
        return new GenerationRequest(p, stops, n, stream, includeUsage, logprobs, topLogprobs, skipSpecialTokens, maxTokensGiven);
    }

    /** Every choice's params, in order. */
    List<SamplingParams> choices() {
        List<SamplingParams> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            all.add(forChoice(i));
        }
        return all;
    }

    /** Choice i's params: a seeded request gives each choice its own seed (seed + i). */
    SamplingParams forChoice(int i) {
        SamplingParams p = params;
        if (p.seed() == null || i == 0) {
            return p;
        }
        return new SamplingParams(p.temperature(), p.topK(), p.topP(), p.minP(), p.seed() + i, p.presencePenalty(), p.frequencyPenalty(),
                p.repetitionPenalty(), p.logitBias(), p.maxTokens(), p.stopTokenIds(), p.ignoreEos(), p.logprobs(), p.constraint(), p.promptLogprobs());
    }
}

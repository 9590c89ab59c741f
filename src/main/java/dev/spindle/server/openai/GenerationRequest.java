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

    static GenerationRequest parse(JsonNode body, JsonNode defaults, int defaultMaxTokens, boolean chat) {
        double temperature = number(body, "temperature", defaults.path("do_sample").asBoolean(true) ? defaults.path("temperature").asDouble(1.0) : 0.0);
        double topP = number(body, "top_p", defaults.path("top_p").asDouble(1.0));
        int topK = (int) number(body, "top_k", defaults.path("top_k").asInt(0));
        if (topK < 0) {
            topK = 0; // vLLM's -1 means off
        }
        double minP = number(body, "min_p", defaults.path("min_p").asDouble(0.0));
        Long seed = body.hasNonNull("seed") ? body.get("seed").asLong() : null;
        int maxTokens = (int) number(body, "max_completion_tokens", number(body, "max_tokens", defaultMaxTokens));
        int n = (int) number(body, "n", 1);
        if (n < 1 || n > 16) {
            throw ApiException.badRequest("n must be between 1 and 16, got " + n, "n");
        }
        boolean logprobs;
        int top;
        if (chat) {
            logprobs = body.path("logprobs").asBoolean(false);
            top = (int) number(body, "top_logprobs", 0);
            if (top > 0 && !logprobs) {
                throw ApiException.badRequest("top_logprobs needs logprobs: true", "top_logprobs");
            }
        } else {
            logprobs = body.hasNonNull("logprobs");
            top = logprobs ? (int) number(body, "logprobs", 0) : 0;
        }
        Map<Integer, Double> bias = new HashMap<>();
        JsonNode lb = body.get("logit_bias");
        if (lb != null && !lb.isNull()) {
            if (!lb.isObject()) {
                throw ApiException.badRequest("logit_bias must map token ids to numbers", "logit_bias");
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = lb.fields(); it.hasNext(); ) {
                var e = it.next();
                try {
                    bias.put(Integer.parseInt(e.getKey()), Math.max(-100, Math.min(100, e.getValue().asDouble())));
                } catch (NumberFormatException ex) {
                    throw ApiException.badRequest("logit_bias keys must be token ids, got '" + e.getKey() + "'", "logit_bias");
                }
            }
        }
        List<String> stops = new ArrayList<>();
        JsonNode stop = body.get("stop");
        if (stop != null && stop.isTextual()) {
            stops.add(stop.asText());
        } else if (stop != null && stop.isArray()) {
            stop.forEach(s -> stops.add(s.asText()));
        }
        Set<Integer> stopIds = new HashSet<>();
        body.path("stop_token_ids").forEach(t -> stopIds.add(t.asInt()));
        SamplingParams params;
        try {
            params = new SamplingParams(temperature, topK, topP, minP, seed, number(body, "presence_penalty", 0), number(body, "frequency_penalty", 0),
                    number(body, "repetition_penalty", defaults.path("repetition_penalty").asDouble(1.0)), bias, maxTokens, stopIds,
                    body.path("ignore_eos").asBoolean(false), logprobs ? Math.max(0, top) : -1, null,
                    !chat && logprobs && body.path("echo").asBoolean(false) ? Math.max(0, top) : -1);
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), null);
        }
        boolean stream = body.path("stream").asBoolean(false);
        boolean usage = stream && body.path("stream_options").path("include_usage").asBoolean(false);
        boolean given = body.hasNonNull("max_tokens") || body.hasNonNull("max_completion_tokens");
        return new GenerationRequest(params, stops, n, stream, usage, logprobs, Math.max(0, top), body.path("skip_special_tokens").asBoolean(true), given);
    }

    private static double number(JsonNode body, String field, double dflt) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw ApiException.badRequest(field + " must be a number, got " + v, field);
        }
        return v.asDouble();
    }

    GenerationRequest withParams(SamplingParams p) {
        return new GenerationRequest(p, stops, n, stream, includeUsage, logprobs, topLogprobs, skipSpecialTokens, maxTokensGiven);
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

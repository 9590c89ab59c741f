package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.sample.SamplingParams;
import dev.spindle.sample.TokenRules;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The sampling and stopping fields shared by /v1/chat/completions and /v1/completions (and,
 * translated, the Responses and Messages APIs), read from the request JSON with the model's
 * generation_config.json as defaults. vLLM's request extensions are honoured here
 * ({@code min_tokens}, {@code allowed_token_ids}, {@code bad_words}, {@code include_stop_str_in_output},
 * {@code skip_special_tokens}, {@code return_tokens_as_token_ids}, {@code prompt_logprobs},
 * {@code truncate_prompt_tokens}) or refused with a 400 naming the field ({@link #UNSUPPORTED}).
 *
 * @param truncatePromptTokens keep only the prompt's last this many tokens (0: the whole prompt; -1: the context's worth)
 * @param tokenIdsAsKeys       vLLM's return_tokens_as_token_ids: logprob tokens as {@code token_id:N}
 * @param promptLogprobs       vLLM's prompt_logprobs: this many alternatives per prompt token (-1: not asked)
 */
public record GenerationRequest(SamplingParams params, List<String> stops, int n, boolean stream, boolean includeUsage,
                                boolean logprobs, int topLogprobs, boolean skipSpecialTokens,
                                boolean includeStopStr, int truncatePromptTokens, boolean tokenIdsAsKeys, int promptLogprobs,
                                boolean continuousUsage) {

    /** What the server supplies: generation_config.json, its limits, and the tokenizer (for bad_words). */
    record Context(JsonNode defaults, int defaultMaxTokens, int vocab, int maxLogprobs, java.util.function.Function<String, int[]> encode) {
    }

    /**
     * Fields vLLM or OpenAI define that Spindle does not implement, each with the value that means
     * "off" (null: any value is refused): a request that sets one is a 400 naming it, never a 200
     * that silently ignores it.
     */
    static final Map<String, Object> UNSUPPORTED = unsupported();

    private static Map<String, Object> unsupported() {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        m.put("best_of", 1);
        m.put("use_beam_search", false);
        m.put("length_penalty", 1);
        m.put("early_stopping", false);
        m.put("prompt_embeds", null);
        m.put("guided_regex", null);
        m.put("guided_choice", null);
        m.put("guided_grammar", null);
        m.put("guided_whitespace_pattern", null);
        m.put("guided_decoding_backend", null);
        m.put("logits_processors", null);
        m.put("return_token_strs", false);
        m.put("spaces_between_special_tokens", true);
        m.put("priority", 0);
        m.put("mm_processor_kwargs", null);
        m.put("vllm_xargs", null);
        m.put("kv_transfer_params", null);
        m.put("documents", null);
        m.put("cache_salt", null);
        m.put("chat_template", null);
        m.put("media_io_kwargs", null);
        m.put("audio", null);
        m.put("modalities", null);
        m.put("prediction", null);
        m.put("web_search_options", null);
        m.put("functions", null);
        m.put("function_call", null);
        return m;
    }

    /** Refuses a field of {@link #UNSUPPORTED} set to anything but its "off" value. */
    static void refuseUnsupported(JsonNode body) {
        for (Map.Entry<String, Object> e : UNSUPPORTED.entrySet()) {
            JsonNode v = body.get(e.getKey());
            if (v == null || v.isNull()) {
                continue;
            }
            Object off = e.getValue();
            boolean neutral = off instanceof Boolean b ? v.isBoolean() && v.asBoolean() == b
                    : off instanceof Integer i ? v.isNumber() && v.asDouble() == i : false;
            if (!neutral) {
                throw ApiException.badRequest(e.getKey() + " is not supported by this server" + (off == null ? "" : " (only " + off + ")")
                        + "; leave it out", e.getKey());
            }
        }
        JsonNode so = body.get("suffix");
        if (so != null && !so.isNull() && !(so.isTextual() && so.asText().isEmpty())) {
            throw ApiException.badRequest("suffix (fill in the middle) is not supported by this server; leave it out", "suffix");
        }
    }

    /**
     * Fits max_tokens to the context, as vLLM does: max_tokens (given, or the server's default cap) is a
     * ceiling, and a reply never runs past what the context leaves after the prompt. A prompt that
     * leaves no room is refused.
     */
    public GenerationRequest fitToContext(int promptTokens, int contextTokens) {
        int left = contextTokens - promptTokens;
        if (left <= 0) {
            throw ApiException.badRequest("the prompt has " + promptTokens + " tokens; the model's context is " + contextTokens, "messages");
        }
        if (params.maxTokens() > left) {
            return withParams(params.withMaxTokens(left));
        }
        return this;
    }

    /** The prompt as the engine gets it: its last {@link #truncatePromptTokens} tokens when asked (-1: the context's worth). */
    public int[] truncate(int[] prompt, int contextTokens) {
        int keep = truncatePromptTokens == -1 ? contextTokens : truncatePromptTokens;
        if (keep <= 0 || prompt.length <= keep) {
            return prompt;
        }
        return java.util.Arrays.copyOfRange(prompt, prompt.length - keep, prompt.length);
    }

    /** @param ctx the defaults, the vocabulary size (token ids in logit_bias and stop_token_ids are checked against it) and limits */
    public static GenerationRequest parse(JsonNode body, Context ctx, boolean chat) {
        refuseUnsupported(body);
        JsonNode defaults = ctx.defaults();
        int vocab = ctx.vocab();
        int defaultMaxTokens = ctx.defaultMaxTokens();
        int maxLogprobs = ctx.maxLogprobs();
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
            top = (int) Fields.integer(body, "top_logprobs", 0, 0, maxLogprobs);
            if (top > 0 && !logprobs) {
                throw ApiException.badRequest("top_logprobs needs logprobs: true", "top_logprobs");
            }
        } else {
            logprobs = Fields.get(body, "logprobs") != null;
            top = logprobs ? (int) Fields.integer(body, "logprobs", 0, 0, maxLogprobs) : 0;
        }
        JsonNode plNode = Fields.get(body, "prompt_logprobs");
        int promptLogprobs = plNode == null ? -1 : (int) Fields.integer(body, "prompt_logprobs", 0, 0, maxLogprobs);
        boolean tokenIdsAsKeys = Fields.bool(body, "return_tokens_as_token_ids", false);
        boolean includeStopStr = Fields.bool(body, "include_stop_str_in_output", false);
        long truncate = Fields.integer(body, "truncate_prompt_tokens", 0, -1, Integer.MAX_VALUE);
        int minTokens = (int) Fields.integer(body, "min_tokens", 0, 0, Integer.MAX_VALUE);
        int[] allowed = null;
        JsonNode allowedNode = Fields.array(body, "allowed_token_ids");
        if (allowedNode != null) {
            if (allowedNode.isEmpty()) {
                throw ApiException.badRequest("allowed_token_ids must list at least one token id", "allowed_token_ids");
            }
            allowed = new int[allowedNode.size()];
            for (int i = 0; i < allowed.length; i++) {
                allowed[i] = (int) Fields.integerValue(allowedNode.get(i), "allowed_token_ids[" + i + "]", 0, 0, vocab - 1);
            }
        }
        List<int[]> badWords = new ArrayList<>();
        JsonNode bw = Fields.array(body, "bad_words");
        if (bw != null) {
            for (int i = 0; i < bw.size(); i++) {
                if (!bw.get(i).isTextual() || bw.get(i).asText().isEmpty()) {
                    throw ApiException.badRequest("bad_words[" + i + "] must be a non-empty string, got " + bw.get(i), "bad_words[" + i + "]");
                }
                String w = bw.get(i).asText();
                // as vLLM: the word as written and with a leading space (how it is tokenized mid-sentence)
                badWords.add(ctx.encode().apply(w));
                if (!w.startsWith(" ")) {
                    badWords.add(ctx.encode().apply(" " + w));
                }
            }
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
        boolean continuous = stream && so != null && Fields.bool(so, "continuous_usage_stats", false);
        boolean skipSpecial = Fields.bool(body, "skip_special_tokens", true);
        Fields.string(body, "user", null);
        SamplingParams params;
        try {
            int scoring = Math.max(logprobs && echo ? Math.max(0, top) : -1, promptLogprobs);
            params = SamplingParams.builder().temperature(temperature).topK(topK).topP(topP).minP(minP).seed(seed)
                    .presencePenalty(presence).frequencyPenalty(frequency).repetitionPenalty(repetition).logitBias(bias)
                    .maxTokens(maxTokens).stopTokenIds(stopIds).ignoreEos(ignoreEos).logprobs(logprobs ? Math.max(0, top) : -1)
                    .promptLogprobs(scoring)
                    .rules(minTokens == 0 && allowed == null && badWords.isEmpty() ? TokenRules.NONE : new TokenRules(minTokens, allowed, badWords))
                    .build();
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(e.getMessage(), e.getMessage().startsWith("max_tokens") ? "max_tokens" : null);
        }
        boolean given = body.hasNonNull("max_tokens") || body.hasNonNull("max_completion_tokens");
        if (minTokens > maxTokens && given) {
            throw ApiException.badRequest("min_tokens (" + minTokens + ") must not exceed max_tokens (" + maxTokens + ")", "min_tokens");
        }
        return new GenerationRequest(params, stops, n, stream, usage, logprobs, Math.max(0, top), skipSpecial, includeStopStr,
                (int) truncate, tokenIdsAsKeys, promptLogprobs, continuous);
    }

    GenerationRequest withParams(SamplingParams p) {
        return new GenerationRequest(p, stops, n, stream, includeUsage, logprobs, topLogprobs, skipSpecialTokens,
                includeStopStr, truncatePromptTokens, tokenIdsAsKeys, promptLogprobs, continuousUsage);
    }

    /** Every choice's params, in order. */
    public List<SamplingParams> choices() {
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
        return p.toBuilder().seed(p.seed() + i).build();
    }
}

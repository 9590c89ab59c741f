package dev.spindle.sample;


import java.util.Map;
import java.util.Set;

/**
 * How one sequence chooses its tokens and when it stops (token-level; stop strings are
 * matched on text by the caller, which then cancels).
 *
 * @param temperature       0 = greedy
 * @param topK              0 = off
 * @param topP              1 = off
 * @param minP              0 = off
 * @param seed              null = random
 * @param repetitionPenalty 1 = off (HF's: logits of seen tokens divided, or multiplied if negative)
 * @param logitBias         token id -> added to its logit
 * @param maxTokens         tokens to generate at most
 * @param stopTokenIds      extra ids that end the sequence (besides EOS unless ignoreEos)
 * @param logprobs          -1 = none; otherwise the sampled token's logprob plus this many top alternatives
 * @param constraint        null, or makes each sequence's grammar constraint (structured output)
 * @param promptLogprobs    -1 = none; otherwise each prompt token's logprob plus this many top alternatives (scoring)
 * @param rules             min_tokens, allowed_token_ids and bad_words ({@link TokenRules#NONE}: none)
 */
public record SamplingParams(double temperature, int topK, double topP, double minP, Long seed,
                             double presencePenalty, double frequencyPenalty, double repetitionPenalty,
                             Map<Integer, Double> logitBias, int maxTokens, Set<Integer> stopTokenIds, boolean ignoreEos,
                             int logprobs, java.util.function.Supplier<dev.spindle.grammar.GrammarConstraint> constraint,
                             int promptLogprobs, TokenRules rules) {
    /** Without token rules. */
    public SamplingParams(double temperature, int topK, double topP, double minP, Long seed,
                          double presencePenalty, double frequencyPenalty, double repetitionPenalty,
                          Map<Integer, Double> logitBias, int maxTokens, Set<Integer> stopTokenIds, boolean ignoreEos,
                          int logprobs, java.util.function.Supplier<dev.spindle.grammar.GrammarConstraint> constraint,
                          int promptLogprobs) {
        this(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, maxTokens, stopTokenIds,
                ignoreEos, logprobs, constraint, promptLogprobs, TokenRules.NONE);
    }

    public SamplingParams {
        logitBias = Map.copyOf(logitBias);
        rules = rules == null ? TokenRules.NONE : rules;
        stopTokenIds = Set.copyOf(stopTokenIds);
        if (temperature < 0 || !Double.isFinite(temperature)) {
            throw new IllegalArgumentException("temperature must be a finite number >= 0, got " + temperature);
        }
        if (topK < 0) {
            throw new IllegalArgumentException("top_k must be >= 0 (0 disables it), got " + topK);
        }
        if (!(topP > 0 && topP <= 1)) {
            throw new IllegalArgumentException("top_p must be in (0, 1], got " + topP);
        }
        if (!(minP >= 0 && minP <= 1)) {
            throw new IllegalArgumentException("min_p must be in [0, 1], got " + minP);
        }
        if (!(repetitionPenalty > 0)) {
            throw new IllegalArgumentException("repetition_penalty must be > 0, got " + repetitionPenalty);
        }
        if (maxTokens < 0 || (maxTokens == 0 && promptLogprobs < 0)) {
            throw new IllegalArgumentException("max_tokens must be >= 1 (0 only to score a prompt with echo and logprobs), got " + maxTokens);
        }
    }

    public SamplingParams withMaxTokens(int max) {
        return new SamplingParams(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, max,
                stopTokenIds, ignoreEos, logprobs, constraint, promptLogprobs, rules);
    }

    public SamplingParams withIgnoreEos(boolean ignore) {
        return new SamplingParams(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, maxTokens,
                stopTokenIds, ignore, logprobs, constraint, promptLogprobs, rules);
    }

    public SamplingParams withConstraint(java.util.function.Supplier<dev.spindle.grammar.GrammarConstraint> c) {
        return new SamplingParams(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, maxTokens,
                stopTokenIds, ignoreEos, logprobs, c, promptLogprobs, rules);
    }

    public SamplingParams withRules(TokenRules r) {
        return new SamplingParams(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, maxTokens,
                stopTokenIds, ignoreEos, logprobs, constraint, promptLogprobs, r);
    }

    /** min_tokens (0: none). */
    public int minTokens() {
        return rules.minTokens();
    }

    public static SamplingParams greedy(int maxTokens) {
        return new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), maxTokens, Set.of(), false, -1, null, -1);
    }
}

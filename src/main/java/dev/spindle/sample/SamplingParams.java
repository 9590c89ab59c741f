package dev.spindle.sample;

import dev.spindle.grammar.GrammarConstraint;

import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

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
                             int logprobs, Supplier<GrammarConstraint> constraint,
                             int promptLogprobs, TokenRules rules) {
    /** Without token rules. */
    public SamplingParams(double temperature, int topK, double topP, double minP, Long seed,
                          double presencePenalty, double frequencyPenalty, double repetitionPenalty,
                          Map<Integer, Double> logitBias, int maxTokens, Set<Integer> stopTokenIds, boolean ignoreEos,
                          int logprobs, Supplier<GrammarConstraint> constraint,
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
        return toBuilder().maxTokens(max).build();
    }

    public SamplingParams withIgnoreEos(boolean ignore) {
        return toBuilder().ignoreEos(ignore).build();
    }

    public SamplingParams withConstraint(Supplier<GrammarConstraint> c) {
        return toBuilder().constraint(c).build();
    }

    public SamplingParams withRules(TokenRules r) {
        return toBuilder().rules(r).build();
    }

    /** min_tokens (0: none). */
    public int minTokens() {
        return rules.minTokens();
    }

    public static SamplingParams greedy(int maxTokens) {
        return builder().maxTokens(maxTokens).build();
    }

    /** Greedy, no penalties, bias, stop ids, logprobs, grammar or token rules, 16 tokens; set what differs. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding these params. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.temperature = temperature;
        b.topK = topK;
        b.topP = topP;
        b.minP = minP;
        b.seed = seed;
        b.presencePenalty = presencePenalty;
        b.frequencyPenalty = frequencyPenalty;
        b.repetitionPenalty = repetitionPenalty;
        b.logitBias = logitBias;
        b.maxTokens = maxTokens;
        b.stopTokenIds = stopTokenIds;
        b.ignoreEos = ignoreEos;
        b.logprobs = logprobs;
        b.constraint = constraint;
        b.promptLogprobs = promptLogprobs;
        b.rules = rules;
        return b;
    }

    /** Sets fields by name; {@link #build} checks them (the record's rules). */
    public static final class Builder {
        private double temperature;
        private int topK;
        private double topP = 1;
        private double minP;
        private Long seed;
        private double presencePenalty, frequencyPenalty;
        private double repetitionPenalty = 1;
        private Map<Integer, Double> logitBias = Map.of();
        private int maxTokens = 16;
        private Set<Integer> stopTokenIds = Set.of();
        private boolean ignoreEos;
        private int logprobs = -1;
        private Supplier<GrammarConstraint> constraint;
        private int promptLogprobs = -1;
        private TokenRules rules = TokenRules.NONE;

        private Builder() {
        }

        public Builder temperature(double v) { temperature = v; return this; }

        public Builder topK(int v) { topK = v; return this; }

        public Builder topP(double v) { topP = v; return this; }

        public Builder minP(double v) { minP = v; return this; }

        public Builder seed(Long v) { seed = v; return this; }

        public Builder presencePenalty(double v) { presencePenalty = v; return this; }

        public Builder frequencyPenalty(double v) { frequencyPenalty = v; return this; }

        public Builder repetitionPenalty(double v) { repetitionPenalty = v; return this; }

        public Builder logitBias(Map<Integer, Double> v) { logitBias = v; return this; }

        public Builder maxTokens(int v) { maxTokens = v; return this; }

        public Builder stopTokenIds(Set<Integer> v) { stopTokenIds = v; return this; }

        public Builder ignoreEos(boolean v) { ignoreEos = v; return this; }

        public Builder logprobs(int v) { logprobs = v; return this; }

        public Builder constraint(Supplier<GrammarConstraint> v) { constraint = v; return this; }

        public Builder promptLogprobs(int v) { promptLogprobs = v; return this; }

        public Builder rules(TokenRules v) { rules = v; return this; }

        public SamplingParams build() {
            return new SamplingParams(temperature, topK, topP, minP, seed, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias,
                    maxTokens, stopTokenIds, ignoreEos, logprobs, constraint, promptLogprobs, rules);
        }
    }
}

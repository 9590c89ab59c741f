package dev.spindle.sample;

import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * Which tokens a sequence may choose, beyond sampling and grammar (vLLM's request extensions):
 * no end token before {@code minTokens} generated tokens, only {@code allowed} ids when given,
 * and never the token that would complete one of the {@code badWords} (token sequences) given
 * the output so far. Applied to a row of logits as a mask, before sampling or verification.
 *
 * @param minTokens the end tokens (EOS and stop ids) are masked until this many tokens are out
 * @param allowed   sorted ids that may be chosen, or null for all
 * @param badWords  token sequences that may not appear in the output
 */
public record TokenRules(int minTokens, int[] allowed, List<int[]> badWords) {
    public static final TokenRules NONE = new TokenRules(0, null, List.of());

    public TokenRules {
        if (minTokens < 0) {
            throw new IllegalArgumentException("min_tokens must be >= 0, got " + minTokens);
        }
        if (allowed != null) {
            allowed = Arrays.stream(allowed).sorted().distinct().toArray();
            if (allowed.length == 0) {
                throw new IllegalArgumentException("allowed_token_ids must name at least one token");
            }
        }
        badWords = badWords.stream().filter(w -> w.length > 0).map(int[]::clone).toList();
    }

    /** Whether any rule masks something after {@code generated} output tokens. */
    public boolean active(int generated) {
        return allowed != null || !badWords.isEmpty() || generated < minTokens;
    }

    /**
     * Masks {@code row} in place for the next token.
     *
     * @param output the sequence's tokens; the output is {@code output[from, from + generated)}
     * @param ends   the ids that would end the sequence (masked before min_tokens, unless nothing else is left)
     */
    public void apply(float[] row, int[] output, int from, int generated, Set<Integer> ends) {
        if (allowed != null) {
            int next = 0;
            for (int id = 0; id < row.length; id++) {
                if (next < allowed.length && allowed[next] == id) {
                    next++;
                } else {
                    row[id] = Float.NEGATIVE_INFINITY;
                }
            }
        }
        for (int[] w : badWords) {
            int prefix = w.length - 1;
            if (prefix > generated) {
                continue;
            }
            boolean match = true;
            for (int k = 0; k < prefix && match; k++) {
                match = output[from + generated - prefix + k] == w[k];
            }
            int last = w[prefix];
            if (match && last >= 0 && last < row.length) {
                row[last] = Float.NEGATIVE_INFINITY;
            }
        }
        if (generated < minTokens) {
            float[] saved = new float[ends.size()];
            int i = 0;
            for (int id : ends) {
                if (id >= 0 && id < row.length) {
                    saved[i] = row[id];
                    row[id] = Float.NEGATIVE_INFINITY;
                }
                i++;
            }
            boolean left = false;
            for (float v : row) {
                if (v != Float.NEGATIVE_INFINITY) {
                    left = true;
                    break;
                }
            }
            if (!left) { // a grammar that can only end here: ending beats a row with nothing to choose
                i = 0;
                for (int id : ends) {
                    if (id >= 0 && id < row.length) {
                        row[id] = saved[i];
                    }
                    i++;
                }
            }
        }
    }
}

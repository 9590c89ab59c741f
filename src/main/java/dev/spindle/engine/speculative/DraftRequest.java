package dev.spindle.engine.speculative;

import dev.spindle.sample.SamplingParams;

/**
 * One sequence asking for drafts.
 *
 * @param id        the sequence
 * @param tokens    its committed tokens (prompt and output) in [0, length); read only, valid during the call
 * @param length    how many tokens are committed
 * @param maxTokens drafts wanted at most (at least 1)
 * @param sampling  the sequence's sampling settings (a proposer that samples its drafts uses its temperature, top-k,
 *                  top-p and seed), or null
 */
public record DraftRequest(long id, int[] tokens, int length, int maxTokens, SamplingParams sampling) {
    public DraftRequest(long id, int[] tokens, int length, int maxTokens) {
        this(id, tokens, length, maxTokens, null);
    }
}

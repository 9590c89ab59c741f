package dev.spindle.engine.spec;

/**
 * One sequence asking for drafts.
 *
 * @param id        the sequence
 * @param tokens    its committed tokens (prompt and output) in [0, length); read only, valid during the call
 * @param length    how many tokens are committed
 * @param maxTokens drafts wanted at most (at least 1)
 */
public record DraftRequest(long id, int[] tokens, int length, int maxTokens) {
}

package dev.spindle.engine.speculative;

/**
 * Speculative decoding as the engine runs it.
 *
 * @param proposer  what drafts, or null for none
 * @param numTokens drafts per step at most (k)
 * @param maxBatch  the engine drafts only while at most this many sequences decode in a step (verification rows
 *                  cost compute once a step is no longer bound by reading the weights)
 */
public record Speculation(Proposer proposer, int numTokens, int maxBatch) {
    public static final Speculation NONE = new Speculation(null, 0, 0);

    public Speculation {
        if (proposer != null && (numTokens < 1 || maxBatch < 1)) {
            throw new IllegalArgumentException("speculative decoding needs num-speculative-tokens >= 1 and a drafting batch >= 1, got "
                    + numTokens + ", " + maxBatch);
        }
    }

    public boolean enabled() {
        return proposer != null;
    }
}

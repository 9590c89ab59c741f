package dev.spindle.engine;

/**
 * Speculative decoding so far.
 *
 * @param drafts             windows that verified drafts (vLLM's num_drafts)
 * @param draftTokens        draft tokens verified
 * @param acceptedTokens     of those, accepted
 * @param acceptedAtPosition per draft position (0 = the first draft of a window), drafts accepted there
 * @param acceptedLength     per accepted length 0..k, how many windows accepted exactly that many drafts
 * @param proposerNanos      time spent in the proposer (drafting)
 * @param draftedStepNanos   time spent in target forward passes of steps that verified drafts
 * @param draftedSteps       such steps
 * @param draftedStepTokens  tokens those steps emitted (every sequence's, drafted or not)
 * @param observeNanos       time spent handing committed rows to the proposer (a DFlash head's injection), every step
 * @param forwardNanos       time spent in the target's forward passes (the backend's execute), every step
 * @param steps              steps taken with speculation on (drafted or not)
 */
public record SpecStats(long drafts, long draftTokens, long acceptedTokens, long[] acceptedAtPosition, long[] acceptedLength,
                        long proposerNanos, long draftedStepNanos, long draftedSteps, long draftedStepTokens, long observeNanos, long forwardNanos,
                        long steps) {
    public static final SpecStats NONE = new SpecStats(0, 0, 0, new long[0], new long[0], 0, 0, 0, 0, 0, 0, 0);

    /** What happened between two snapshots of the same engine (the per-position arrays are the later one's). */
    public SpecStats since(SpecStats s0) {
        return new SpecStats(drafts - s0.drafts, draftTokens - s0.draftTokens, acceptedTokens - s0.acceptedTokens, acceptedAtPosition, acceptedLength,
                proposerNanos - s0.proposerNanos, draftedStepNanos - s0.draftedStepNanos, draftedSteps - s0.draftedSteps,
                draftedStepTokens - s0.draftedStepTokens, observeNanos - s0.observeNanos, forwardNanos - s0.forwardNanos, steps - s0.steps);
    }

    public double acceptanceRate() {
        return draftTokens == 0 ? 0 : (double) acceptedTokens / draftTokens;
    }

    /** Tokens a drafted window produced on average: accepted drafts plus the target's own token. */
    public double meanAcceptedLength() {
        return drafts == 0 ? 0 : 1 + (double) acceptedTokens / drafts;
    }
}

package dev.spindle.engine.spec;

import java.util.List;

/**
 * Proposes draft tokens for running sequences; the engine verifies them in one target forward.
 * Called on the engine thread only, once per step, for the sequences that draft this step.
 * A proposer keeps what state it needs per sequence id (a draft model's KV) and is told when a
 * sequence ends; it never assumes its drafts were accepted: each call passes the committed tokens,
 * and anything it computed past the first token that differs from them is stale.
 */
public sealed interface Proposer extends AutoCloseable permits NgramProposer, DraftModelProposer {
    /**
     * @return one proposal per request, in order (an empty proposal drafts nothing this step)
     */
    List<Proposal> propose(List<DraftRequest> requests);

    /** The sequence has finished or was cancelled: drop its state. */
    void release(long id);

    /** For the startup log. */
    String describe();

    @Override
    void close();
}

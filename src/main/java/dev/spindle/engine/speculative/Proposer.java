package dev.spindle.engine.speculative;

import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;

import java.util.List;

/**
 * Proposes draft tokens for running sequences; the engine verifies them in one target forward.
 * Called on the engine thread only, once per step, for the sequences that draft this step.
 * A proposer keeps what state it needs per sequence id (a draft model's KV) and is told when a
 * sequence ends; it never assumes its drafts were accepted: each call passes the committed tokens,
 * and anything it computed past the first token that differs from them is stale.
 */
public sealed interface Proposer extends AutoCloseable permits NgramProposer, DraftModelProposer, DFlashProposer {
    /**
     * @return one proposal per request, in order (an empty proposal drafts nothing this step)
     */
    List<Proposal> propose(List<DraftRequest> requests);

    /**
     * The executed target layers whose residual rows this proposer reads (a DFlash head's taps); empty for
     * none. When not empty, the engine taps every window and hands each step's committed rows to {@link #observe}.
     */
    default int[] tapLayers() {
        return new int[0];
    }

    /**
     * A step's committed rows of a sequence: positions {@code [from, from + count)}, {@code taps[r]} the residual
     * after each tap layer of row r (concatenated). Called after verification, only for proposers with taps.
     */
    default void observe(long id, int from, float[][] taps, int count) {
    }

    /** Whether the step's taps may stay on the target's device (the reader takes them there; {@link Observation}). */
    default boolean readsDeviceTaps() {
        return false;
    }

    /** A step's committed rows of several sequences (each as {@link #observe} takes it), in one call. */
    default void observeAll(List<Observation> rows) {
        for (Observation o : rows) {
            observe(o.id(), o.from(), o.taps(), o.count());
        }
    }

    /** The sequence has finished or was cancelled: drop its state. */
    void release(long id);

    /** For the startup log. */
    String describe();

    @Override
    void close();
}

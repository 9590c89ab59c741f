package dev.spindle.step;

import dev.spindle.sample.SamplingParams;

import java.util.List;

/**
 * A draft head that reads the target's own hidden states (DFlash, DFlash2): the backend's half of
 * {@link DFlashProposer}. Per sequence it keeps the context it was given (the target's tapped residual
 * rows, projected into its own K/V), and drafts a whole block in one forward from the anchor (the last
 * committed token) and mask tokens. Called on the engine thread only.
 */
public interface DraftHead extends AutoCloseable {
    /** Rows per draft block (the anchor and block − 1 drafts). */
    int blockSize();

    /** The executed target layers whose residual rows the head reads, in the order of its {@code fc} input. */
    int[] tapLayers();

    /**
     * Adds context rows for positions {@code [from, from + count)}: {@code taps[r]} is row r's residual
     * after each tap layer, concatenated ([layer x hidden]). Rows must follow the context it has.
     */
    void inject(long id, int from, float[][] taps, int count);

    /**
     * Whether this head reads a step's taps where its target's forward pass keeps them (on its device), so that the
     * engine need not bring them to the host: its {@link #injectAll} then takes observations without host taps.
     */
    default boolean readsDeviceTaps() {
        return false;
    }

    /** Several sequences' context rows (each as {@link #inject} takes them; one entry per sequence), in one call. */
    default void injectAll(List<Observation> rows) {
        for (Observation o : rows) {
            inject(o.id(), o.from(), o.taps(), o.count());
        }
    }

    /** The position after the last context row (0 with none), and where its context starts. */
    int contextEnd(long id);

    int contextStart(long id);

    /** Drops context rows at and after {@code position} (a sequence cut back). */
    void truncate(long id, int position);

    /**
     * One draft forward: the anchor at position {@link #contextEnd} and mask tokens after it, {@code drafts}
     * of them (at most block − 1). Greedy ({@code sampling} null or at temperature 0): DFlash's argmax per row,
     * DFlash2's greedy selector walk, q one-hot. Sampled: DFlash draws each row from its logits with the
     * request's temperature, top-k, top-p and min-p; DFlash2 walks its candidates drawing from their scores'
     * softmax at the temperature; either way q (over the vocabulary) is what each draft was drawn from.
     */
    Proposal draft(long id, int anchor, int drafts, Sampling sampling);

    /** One sequence's draft in a batched call ({@link #draftAll}), as {@link #draft} takes it. */
    record Call(long id, int anchor, int drafts, Sampling sampling) {
    }

    /**
     * Several sequences' drafts, in order, each what {@link #draft} gives it alone (a backend may run them in one
     * forward: every row's arithmetic is its own). {@link #lastLogits} then holds the last call's rows.
     */
    default List<Proposal> draftAll(List<Call> calls) {
        List<Proposal> out = new java.util.ArrayList<>(calls.size());
        for (Call c : calls) {
            out.add(draft(c.id(), c.anchor(), c.drafts(), c.sampling()));
        }
        return out;
    }

    /** How a sampled draft is drawn: the request's settings and the sequence's own generator for drafts. */
    record Sampling(SamplingParams params, java.util.random.RandomGenerator rng) {
    }

    /** The draft logits of the last {@link #draft} call's rows (for tests and the parity gate), or null. */
    float[][] lastLogits();

    void release(long id);

    String describe();

    @Override
    void close();
}

package dev.spindle.engine.spec;

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

    /** The position after the last context row (0 with none), and where its context starts. */
    int contextEnd(long id);

    int contextStart(long id);

    /** Drops context rows at and after {@code position} (a sequence cut back). */
    void truncate(long id, int position);

    /**
     * One draft forward: the anchor at position {@link #contextEnd} and mask tokens after it, {@code drafts}
     * of them (at most block − 1); returns the drafted tokens (greedy: DFlash's argmax, DFlash2's
     * selector walk).
     */
    int[] draft(long id, int anchor, int drafts);

    /** The draft logits of the last {@link #draft} call's rows (for tests and the parity gate), or null. */
    float[][] lastLogits();

    void release(long id);

    String describe();

    @Override
    void close();
}

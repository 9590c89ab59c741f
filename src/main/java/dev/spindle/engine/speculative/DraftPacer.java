package dev.spindle.engine.speculative;

/**
 * How much one sequence drafts, from how its drafts have fared: drafting costs proposer time and
 * verification rows, so a sequence whose drafts keep failing pauses and probes again later, and one
 * whose drafts are accepted only in part drafts fewer.
 *
 * <ul>
 *   <li>Length: about one more than the recent mean accepted length (an exponential average), between
 *       1 and the configured maximum; a fully accepted window lets the next one grow.</li>
 *   <li>Pause: one window with nothing accepted is ordinary (with 70% acceptance, 3 windows in 10);
 *       from the second in a row the sequence pauses until the next multiple of 4, 16, 64, then
 *       {@link #MAX_PAUSE} engine steps (growing with each further miss, reset by any accepted
 *       draft), and the window that ends a pause drafts one token only (a probe). The pauses end on multiples of the step number, so the sequences that probe do so in
 *       the same steps and share one proposer pass (a draft model's step costs about the same for
 *       one sequence as for eight).</li>
 * </ul>
 * The longest pause and the probe's one token come from what drafts that are never accepted cost
 * (docs/bench/CHOICES.md).
 */
public final class DraftPacer {
    /** The longest pause between probes, in steps. */
    public static final int MAX_PAUSE = 128;
    private static final double DECAY = 0.5;

    private final int max;
    private double meanAccepted;
    private int misses;
    private long resumeAt;
    private boolean probing; // the first window after a pause drafts one token: a probe costs one proposer step

    /** @param max the configured draft length */
    public DraftPacer(int max) {
        if (max < 1) {
            throw new IllegalArgumentException("draft length must be >= 1, got " + max);
        }
        this.max = max;
        this.meanAccepted = max;
    }

    /** Drafts wanted at engine step {@code step}: 0 while paused. */
    public int next(long step) {
        if (step < resumeAt) {
            return 0;
        }
        return probing ? 1 : Math.max(1, Math.min(max, (int) Math.round(meanAccepted) + 1));
    }

    /** After verifying, at engine step {@code step}, {@code drafted} drafts of which the first {@code accepted} were taken. */
    public void record(long step, int drafted, int accepted) {
        if (drafted == 0) {
            return;
        }
        meanAccepted = accepted == drafted ? Math.max(meanAccepted, accepted + 1) : DECAY * meanAccepted + (1 - DECAY) * accepted;
        if (accepted > 0) {
            misses = 0;
            probing = false;
            return;
        }
        misses++;
        if (misses >= 2) {
            probing = true;
            long pause = Math.min(MAX_PAUSE, 1L << Math.min(2 * (misses - 1), 30));
            resumeAt = (step / pause + 1) * pause;
        }
    }
}

package dev.spindle.engine.spec;

/**
 * How much one sequence drafts, from how its drafts have fared: drafting costs proposer time and
 * verification rows, so a sequence whose drafts keep failing pauses and probes again later, and one
 * whose drafts are accepted only in part drafts fewer.
 *
 * <ul>
 *   <li>Length: about one more than the recent mean accepted length (an exponential average), between
 *       1 and the configured maximum; a fully accepted window lets the next one grow by one.</li>
 *   <li>Pause: after a step in which nothing was accepted, the sequence skips 1, 2, 4, ... up to
 *       {@link #MAX_PAUSE} steps before it drafts again (doubling with each consecutive miss, reset by any
 *       accepted draft), so that when a text is not draftable, drafting costs a probe every
 *       {@code MAX_PAUSE} steps.</li>
 * </ul>
 */
public final class DraftPacer {
    /** The longest pause between probes, in steps. */
    public static final int MAX_PAUSE = 64;
    private static final double DECAY = 0.5;

    private final int max;
    private double meanAccepted;
    private int misses;
    private int pause;

    /** @param max the configured draft length */
    public DraftPacer(int max) {
        if (max < 1) {
            throw new IllegalArgumentException("draft length must be >= 1, got " + max);
        }
        this.max = max;
        this.meanAccepted = max;
    }

    /** Drafts wanted this step: 0 while paused (each call counts a step). */
    public int next() {
        if (pause > 0) {
            pause--;
            return 0;
        }
        return Math.max(1, Math.min(max, (int) Math.ceil(meanAccepted) + 1));
    }

    /** After verifying {@code drafted} drafts of which the first {@code accepted} were taken. */
    public void record(int drafted, int accepted) {
        if (drafted == 0) {
            return;
        }
        meanAccepted = accepted == drafted ? Math.max(meanAccepted, accepted) : DECAY * meanAccepted + (1 - DECAY) * accepted;
        if (accepted == 0) {
            misses++;
            pause = Math.min(MAX_PAUSE, 1 << Math.min(misses - 1, 30));
        } else {
            misses = 0;
        }
    }
}

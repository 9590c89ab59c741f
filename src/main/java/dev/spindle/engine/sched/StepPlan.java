package dev.spindle.engine.sched;

import java.util.List;

/**
 * What one engine step runs.
 *
 * @param entries sequences and how many of their uncomputed tokens run now, in batch order
 */
public record StepPlan(List<Entry> entries) {
    /**
     * @param from    first position to compute (the sequence's written KV length)
     * @param count   tokens to compute this step (a prefill chunk, or 1 when decoding)
     * @param samples whether this chunk reaches the sequence's end, so a token is sampled from its last row
     * @param drafts  proposed tokens after the sequence's last one, verified in this window (count = 1 + drafts); usually none
     */
    public record Entry(Sequence sequence, int from, int count, boolean samples, int[] drafts) {
        public boolean drafted() {
            return drafts.length > 0;
        }
    }

    static final int[] NO_DRAFTS = new int[0];

    public boolean isEmpty() {
        return entries.isEmpty();
    }

    public int tokens() {
        return entries.stream().mapToInt(Entry::count).sum();
    }
}

package dev.spindle.step;

/**
 * Draft tokens for the positions after a sequence's committed tokens.
 *
 * @param tokens the drafts, in order (possibly none)
 * @param q      null when the proposer is deterministic (q is one-hot at each draft); else per draft
 *               the proposer's distribution over the vocabulary it drew the draft from
 */
public record Proposal(int[] tokens, float[][] q) {
    private static final Proposal NONE = new Proposal(new int[0], null);

    public Proposal {
        if (q != null && q.length != tokens.length) {
            throw new IllegalArgumentException(q.length + " distributions for " + tokens.length + " drafts");
        }
    }

    public static Proposal none() {
        return NONE;
    }

    public static Proposal of(int[] tokens) {
        return tokens.length == 0 ? NONE : new Proposal(tokens, null);
    }

    public boolean isEmpty() {
        return tokens.length == 0;
    }
}

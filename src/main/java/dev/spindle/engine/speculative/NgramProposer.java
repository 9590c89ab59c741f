package dev.spindle.engine.speculative;

import dev.spindle.step.Proposal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Prompt lookup (vLLM's "ngram" method): for the longest n in [minN, maxN] whose last n tokens
 * occurred earlier in the sequence (prompt and output), propose the tokens that followed the most
 * recent earlier occurrence. No model, no state: text that repeats its context (code edits,
 * quoting, extraction, agents echoing tool output) drafts itself.
 */
public final class NgramProposer implements Proposer {
    private final int minN, maxN;
    /** Tokens searched back from the end at most, so that a step's cost stays bounded at long contexts. */
    private final int window;

    /**
     * @param minN   shortest suffix matched (at least 1)
     * @param maxN   longest suffix matched
     * @param window how far back to search (tokens); 0 = the whole sequence
     */
    public NgramProposer(int minN, int maxN, int window) {
        if (minN < 1 || maxN < minN || window < 0) {
            throw new IllegalArgumentException("prompt lookup needs 1 <= min n <= max n and a window >= 0, got " + minN + ", " + maxN + ", " + window);
        }
        this.minN = minN;
        this.maxN = maxN;
        this.window = window;
    }

    @Override
    public List<Proposal> propose(List<DraftRequest> requests) {
        List<Proposal> out = new ArrayList<>(requests.size());
        for (DraftRequest r : requests) {
            out.add(Proposal.of(lookup(r.tokens(), r.length(), r.maxTokens())));
        }
        return out;
    }

    /** The continuation of the most recent earlier occurrence of the longest matching suffix, at most {@code k} tokens. */
    int[] lookup(int[] t, int len, int k) {
        int from = window == 0 ? 0 : Math.max(0, len - window);
        for (int n = Math.min(maxN, len - 1); n >= minN; n--) {
            // an occurrence ending at e (exclusive) with e < len: t[e - n, e) == t[len - n, len), then propose t[e, e + k)
            for (int e = len - 1; e - n >= from; e--) {
                if (matches(t, e - n, len - n, n)) {
                    int m = Math.min(k, len - e);
                    return Arrays.copyOfRange(t, e, e + m);
                }
            }
        }
        return new int[0];
    }

    private static boolean matches(int[] t, int a, int b, int n) {
        for (int i = n - 1; i >= 0; i--) {
            if (t[a + i] != t[b + i]) {
                return false;
            }
        }
        return true;
    }

    @Override
    public void release(long id) {
    }

    @Override
    public String describe() {
        return "prompt lookup (n " + minN + ".." + maxN + (window > 0 ? ", last " + window + " tokens" : "") + ")";
    }

    @Override
    public void close() {
    }
}

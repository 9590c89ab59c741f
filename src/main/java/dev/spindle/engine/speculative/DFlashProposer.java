package dev.spindle.engine.speculative;

import dev.spindle.step.DraftHead;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;

import java.util.ArrayList;
import java.util.List;

/**
 * Speculative decoding with a DFlash or DFlash2 head: the target's tapped residual rows of every
 * committed position are injected into the head's context ({@link #observe}, after each step), and
 * a block of drafts comes from one head forward over the anchor and mask tokens. Drafts are deterministic (q
 * one-hot: DFlash's argmax, DFlash2's greedy walk), verified at temperature &gt; 0 by drawing each row's token as
 * plain sampling would (on the device); with sampled drafts, they are drawn from the head's own distribution
 * (DFlash2: its sampled walk) and that q goes to the host's verifier. The target's distribution is kept either way.
 *
 * <p>Context the head never saw (a prompt prefix served from the prefix cache, whose rows the target
 * did not compute) is left out: the head drafts from the context it has, which costs acceptance,
 * never correctness. A sequence whose context does not reach its anchor (a gap) drafts nothing until
 * it does.
 */
public final class DFlashProposer implements Proposer {
    private final DraftHead head;
    private final java.util.Map<Long, java.util.random.RandomGenerator> rngs = new java.util.HashMap<>();
    private final boolean sampledDrafts;

    /** Deterministic drafts at every temperature. */
    public DFlashProposer(DraftHead head) {
        this(head, false);
    }

    /** @param sampledDrafts at temperature &gt; 0, drafts drawn from the head's distribution (see {@link SpeculativeConfig#sampledDrafts}) */
    public DFlashProposer(DraftHead head, boolean sampledDrafts) {
        this.head = head;
        this.sampledDrafts = sampledDrafts;
    }

    public DraftHead head() {
        return head;
    }

    @Override
    public List<Proposal> propose(List<DraftRequest> requests) {
        Proposal[] out = new Proposal[requests.size()];
        List<DraftHead.Call> calls = new ArrayList<>();
        List<Integer> at = new ArrayList<>();
        for (int i = 0; i < requests.size(); i++) {
            DraftRequest r = requests.get(i);
            int anchorPosition = r.length() - 1;
            if (head.contextEnd(r.id()) != anchorPosition || anchorPosition <= head.contextStart(r.id())) {
                out[i] = Proposal.none(); // its context does not reach the anchor (yet)
                continue;
            }
            int n = Math.min(r.maxTokens(), head.blockSize() - 1);
            DraftHead.Sampling sampling = null;
            if (sampledDrafts && r.sampling() != null && r.sampling().temperature() > 0) {
                // the drafts' own generator, per sequence: seeded requests draft the same alone or batched
                Long seed = r.sampling().seed();
                java.util.random.RandomGenerator rng = rngs.computeIfAbsent(r.id(),
                        k -> seed == null ? new java.util.SplittableRandom() : new java.util.SplittableRandom(seed ^ 0x5DEECE66DL));
                sampling = new DraftHead.Sampling(r.sampling(), rng);
            }
            calls.add(new DraftHead.Call(r.id(), r.tokens()[anchorPosition], n, sampling));
            at.add(i);
        }
        if (!calls.isEmpty()) {
            List<Proposal> drafted = head.draftAll(calls); // every drafting sequence's block in one head forward
            for (int j = 0; j < calls.size(); j++) {
                out[at.get(j)] = drafted.get(j);
            }
        }
        return java.util.Arrays.asList(out);
    }

    @Override
    public int[] tapLayers() {
        return head.tapLayers();
    }

    /**
     * Committed rows of a step: positions {@code [from, from + count)} of the sequence with their taps. A row
     * before the head's context end replaces it (a sequence recomputed after preemption): the context is cut
     * back first. Rows after a gap restart the context there.
     */
    @Override
    public void observe(long id, int from, float[][] taps, int count) {
        observeAll(List.of(new Observation(id, from, taps, count)));
    }

    @Override
    public boolean readsDeviceTaps() {
        return head.readsDeviceTaps();
    }

    /** Every sequence's rows into the head at once (one batched injection). */
    @Override
    public void observeAll(List<Observation> rows) {
        for (Observation o : rows) {
            int end = head.contextEnd(o.id());
            if (o.from() < end) {
                head.truncate(o.id(), o.from());
            } else if (o.from() > end) {
                head.release(o.id()); // a gap (cached prefix): the context restarts here (the drafts' generator goes on)
            }
        }
        head.injectAll(rows);
    }

    @Override
    public void release(long id) {
        head.release(id);
        rngs.remove(id);
    }

    @Override
    public String describe() {
        return head.describe();
    }

    @Override
    public void close() {
        head.close();
    }
}

package dev.spindle.engine.sched;

import dev.spindle.engine.SpecStats;
import dev.spindle.engine.speculative.DraftRequest;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.Sampler;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The engine's side of speculative decoding: asking the proposer for drafts, verifying a drafted window row by row as
 * plain decoding would choose each token, handing the proposer the step's committed rows (and their taps), and the
 * counters ({@link SpecStats}). A failing proposer costs its drafts, never the requests.
 */
final class Drafting {
    private final Speculation spec;
    private final ForwardPass model;
    private final Scheduler scheduler;
    private final Emission emission;
    private final int maxPositions;
    private long drafts, draftTokens, acceptedTokens, proposerNanos, draftedStepNanos, draftedSteps, draftedStepTokens, observeNanos;
    private final long[] acceptedAt, acceptedLength;

    Drafting(Speculation spec, ForwardPass model, Scheduler scheduler, Emission emission, int maxPositions) {
        this.spec = spec;
        this.model = model;
        this.scheduler = scheduler;
        this.emission = emission;
        this.maxPositions = maxPositions;
        this.acceptedAt = new long[Math.max(0, spec.numTokens())];
        this.acceptedLength = new long[Math.max(0, spec.numTokens()) + 1];
    }

    /** The target layers the proposer reads (a DFlash head's taps), when the backend can tap them; else none. */
    int[] tapLayers() {
        if (!spec.enabled() || !model.supportsTaps()) {
            return new int[0];
        }
        return spec.proposer().tapLayers();
    }

    /** Whether the proposer takes the taps from the backend's device (a head beside the target): they need not come to the host. */
    boolean tapsStayOnDevice() {
        return spec.enabled() && spec.proposer().readsDeviceTaps();
    }

    /**
     * Asks the proposer for drafts for the sequences that decode this step, each as many as its pacer wants (at most what
     * is left of its max_tokens and the context, less the target's own token). None when speculation is off, or when more
     * sequences decode than the drafting batch.
     *
     * @param step the engine's step count (the pacers' clock)
     */
    Map<Sequence, int[]> propose(long step) {
        List<Sequence> preempted = scheduler.takePreempted();
        if (!spec.enabled()) {
            return Map.of();
        }
        for (Sequence p : preempted) {
            spec.proposer().release(p.id); // its proposer state is rebuilt when it decodes again (frees a draft model's blocks meanwhile)
        }
        List<Sequence> decoding = scheduler.decoding();
        if (decoding.isEmpty() || decoding.size() > spec.maxBatch()) {
            return Map.of();
        }
        List<Sequence> asked = new ArrayList<>();
        List<DraftRequest> requests = new ArrayList<>();
        for (Sequence s : decoding) {
            int want = s.pacer.next(step);
            int room = Math.min(s.params.maxTokens() - s.generated() - 1, maxPositions - s.length - 1);
            int k = Math.min(want, room);
            if (k > 0) {
                asked.add(s);
                requests.add(new DraftRequest(s.id, s.tokens, s.length, k, s.params));
            }
        }
        if (requests.isEmpty()) {
            return Map.of();
        }
        List<Proposal> proposals;
        long t0 = System.nanoTime();
        try {
            proposals = spec.proposer().propose(requests);
        } catch (RuntimeException err) {
            System.err.println("spindle-engine: the proposer failed, this step decodes without drafts: " + err);
            return Map.of();
        } finally {
            proposerNanos += System.nanoTime() - t0;
        }
        Map<Sequence, int[]> out = new HashMap<>();
        for (int i = 0; i < asked.size(); i++) {
            Proposal pr = proposals.get(i);
            int[] d = pr.tokens();
            asked.get(i).draftQ = pr.q();
            if (d.length > 0) {
                out.put(asked.get(i), d.length > requests.get(i).maxTokens() ? Arrays.copyOf(d, requests.get(i).maxTokens()) : d);
            }
        }
        return out;
    }

    /**
     * The device draws that verify a drafted window, or null when the host must (see {@link #verify}): against deterministic
     * drafts (q one-hot, or greedy) verification only needs each row's token by plain decoding's rule, row j drawn with the
     * uniform plain decoding would give that position (read ahead, consumed as rows emit). Never under a grammar, even one
     * that masks nothing now: it may switch on inside the window (at </think>, or at <tool_call> under auto); never against
     * a sampled proposer's q, which the host's rule takes.
     */
    ModelStep.Draw draw(Sequence s, StepPlan.Entry e) {
        SamplingParams p = s.params;
        if (!model.drawsOnDevice() || s.constraint != null || !DeviceDrawing.drawable(s, e.from()) || (p.temperature() > 0 && s.draftQ != null)) {
            return null;
        }
        return DeviceDrawing.draw(p, p.temperature() > 0 ? s.rng.peekDoubles(e.count()) : new double[e.count()]);
    }

    /**
     * Verifies a drafted window row by row, exactly as plain decoding would choose each token: row j (masked by the grammar
     * in its state after the tokens before it) gives the target's token for the position of draft j; the draft is accepted
     * when the verifier says so (greedy: it equals the token plain greedy chooses), and the first rejection emits the
     * verifier's correction and ends the window; if every draft is accepted the last row gives one more token. Rejected
     * positions are cut from the table, so their K/V are never read or published to the prefix cache.
     *
     * @param step the engine's step count (the pacers' clock)
     * @return the drafts accepted
     */
    int verify(Sequence s, StepPlan.Entry e, float[][] rows, int[] drawn, long step) {
        int[] d = e.drafts();
        int accepted = 0;
        for (int j = 0; j <= d.length; j++) {
            int draft = j < d.length ? d[j] : -1;
            Sampler.Choice c;
            boolean ok;
            if (drawn != null) {
                c = new Sampler.Choice(drawn[j], Double.NaN, new int[0], new double[0]);
                ok = drawn[j] == draft;
                if (s.params.temperature() > 0) {
                    s.rng.nextDouble(); // the row's uniform (read ahead for the device draw) is used up by its token
                }
            } else {
                float[] row = rows[j];
                emission.restrict(s, row);
                if (s.constraint != null && !s.constraint.unmasked()) {
                    s.constraint.mask(row);
                }
                if (draft < 0) {
                    c = Sampler.sample(row, s.params, s.counts, s.outputCounts, s.rng);
                    ok = false;
                } else {
                    Sampler.Verdict v = Sampler.verify(row, s.params, s.counts, s.outputCounts, s.rng, draft, s.draftQ == null ? null : s.draftQ[j]);
                    c = v.choice();
                    ok = v.accepted();
                }
            }
            emission.emit(s, c);
            if (!ok) {
                break;
            }
            accepted++;
            if (s.finished) {
                break;
            }
        }
        drafts++;
        draftTokens += d.length;
        acceptedTokens += accepted;
        for (int j = 0; j < accepted && j < acceptedAt.length; j++) {
            acceptedAt[j]++;
        }
        acceptedLength[Math.min(accepted, acceptedLength.length - 1)]++;
        s.pacer.record(step, d.length, accepted);
        if (!s.finished) {
            s.table.truncate(e.from() + 1 + accepted);
            scheduler.registerFullBlocks(s);
        }
        return accepted;
    }

    /** A window's committed rows, held until the step's windows are all verified: the proposer takes them at once. */
    record Observed(Sequence sequence, Observation rows) {
    }

    /**
     * Notes a window's committed rows and their taps for the proposer (one that reads the target's hidden states): the
     * host rows, or (kept on the device) where they sit in the step.
     */
    static void observe(List<Observed> observed, Sequence s, int from, StepOutput out, int window, int stepRow, boolean tapped, int count) {
        if (s.finished || !tapped) {
            return;
        }
        float[][] rows = out.taps() == null ? null : out.taps().get(window);
        observed.add(new Observed(s, new Observation(s.id, from, rows, rows == null ? count : Math.min(count, rows.length), stepRow)));
    }

    /** Hands the step's committed rows to the proposer in one call (the sequences that finished meanwhile left out). */
    void observeAll(List<Observed> observed) {
        List<Observation> batch = new ArrayList<>();
        for (Observed o : observed) {
            if (!o.sequence().finished) {
                batch.add(o.rows());
            }
        }
        if (batch.isEmpty()) {
            return;
        }
        long t0 = System.nanoTime();
        try {
            spec.proposer().observeAll(batch);
            observeNanos += System.nanoTime() - t0;
        } catch (RuntimeException err) {
            for (Observation o : batch) {
                spec.proposer().release(o.id());
            }
            System.err.println("spindle-engine: the proposer could not take a step's hidden states: " + err);
        }
    }

    /** A drafted step's time (the host's verification and sampling included, as in a plain step) and the tokens it gave. */
    void draftedStep(long nanos, long tokens) {
        draftedStepNanos += nanos;
        draftedSteps++;
        draftedStepTokens += tokens;
    }

    /** The counters, with the forward passes' time and count (the engine's). */
    SpecStats stats(long forwardNanos, long forwardSteps) {
        return spec.enabled() ? new SpecStats(drafts, draftTokens, acceptedTokens, acceptedAt.clone(), acceptedLength.clone(), proposerNanos,
                draftedStepNanos, draftedSteps, draftedStepTokens, observeNanos, forwardNanos, forwardSteps) : SpecStats.NONE;
    }
}

package dev.spindle.engine.sched;

import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.Sampler;
import dev.spindle.sample.SamplingParams;

import java.util.HashSet;
import java.util.Set;

/**
 * What the engine does with a sequence's chosen tokens: append, stop rules (end ids, stop ids, max_tokens, the context),
 * the event to its sink, and finishing (out of the scheduler, its blocks and proposer state freed). Host sampling with
 * the request's grammar and token rules ends here too. A sink that throws loses its request, never the engine.
 */
final class Emission {
    private final Scheduler scheduler;
    private final Speculation spec;
    private final Set<Integer> eos;
    private final int maxPositions;
    long generatedTokens, finished;

    Emission(Scheduler scheduler, Speculation spec, Set<Integer> eos, int maxPositions) {
        this.scheduler = scheduler;
        this.spec = spec;
        this.eos = Set.copyOf(eos);
        this.maxPositions = maxPositions;
    }

    /** Appends a chosen token, ends the sequence where a stop rule says so, and sends its event. */
    void emit(Sequence s, Sampler.Choice c) {
        SamplingParams p = s.params;
        if (s.constraint != null) {
            s.constraint.accept(c.token());
        }
        s.append(c.token());
        generatedTokens++;
        String finish = null;
        if ((!p.ignoreEos() && eos.contains(c.token())) || p.stopTokenIds().contains(c.token())) {
            finish = "stop";
        } else if (s.generated() >= p.maxTokens() || s.length >= maxPositions) {
            finish = "length";
        }
        if (finish != null) {
            finish(s);
        }
        deliver(s, new TokenEvent(s.id, c.token(), c.logprob(), c.topIds(), c.topLogprobs(), finish, s.promptLength,
                s.cachedTokens, s.generated(), promptLogprobsOnce(s)));
    }

    /** A request with max_tokens 0 (prompt scoring): finished with its prompt's logprobs and no token. */
    void emitNothing(Sequence s) {
        finish(s);
        deliver(s, new TokenEvent(s.id, -1, Double.NaN, new int[0], new double[0], "length", s.promptLength, s.cachedTokens, 0,
                promptLogprobsOnce(s)));
    }

    /**
     * Samples the sequence's next token on the host from its last row and emits it.
     *
     * @param masked whether {@code logits} is already masked by the sequence's grammar (GrammarMasks.apply)
     */
    void sampleAndEmit(Sequence s, float[] logits, boolean masked) {
        float[] row = logits;
        if (s.constraint != null && !s.constraint.unmasked() && !masked) {
            row = logits.clone();
            s.constraint.mask(row);
        }
        if (s.params.rules().active(s.generated())) {
            row = row == logits && !masked ? logits.clone() : row;
            restrict(s, row);
        }
        emit(s, Sampler.sample(row, s.params, s.counts, s.outputCounts, s.rng));
    }

    /** The request's token rules (min_tokens, allowed_token_ids, bad_words), masked into its next token's row. */
    void restrict(Sequence s, float[] row) {
        var rules = s.params.rules();
        if (!rules.active(s.generated())) {
            return;
        }
        Set<Integer> ends = new HashSet<>(s.params.stopTokenIds());
        if (!s.params.ignoreEos()) {
            ends.addAll(eos);
        }
        rules.apply(row, s.tokens, s.promptLength, s.generated(), ends);
    }

    /** Ends a sequence (finished, cancelled or failed): out of the scheduler, its blocks and proposer state freed. */
    void finish(Sequence s) {
        if (s.finished) {
            return;
        }
        s.finished = true;
        scheduler.finish(s);
        if (spec.enabled()) {
            spec.proposer().release(s.id);
        }
        finished++;
    }

    /** Ends a sequence with an error for its sink. */
    void fail(Sequence s, Throwable err) {
        finish(s);
        try {
            s.sink.onError(err);
        } catch (RuntimeException ignored) {
            // the sink is broken; nothing more to tell it
        }
    }

    private void deliver(Sequence s, TokenEvent e) {
        try {
            s.sink.onToken(e);
        } catch (RuntimeException err) {
            fail(s, err);
        }
    }

    /** Row r of a prefill chunk starting at {@code from} predicts prompt token from + r + 1. */
    static void recordPromptLogprobs(Sequence s, int from, float[][] rows) {
        int top = s.params.promptLogprobs();
        for (int r = 0; r < rows.length; r++) {
            int target = from + r + 1;
            if (target >= s.promptLength) {
                break;
            }
            Sampler.Choice c = Sampler.scoreOf(rows[r], s.tokens[target], top);
            s.promptLogprobs[target] = c.logprob();
            s.promptTopIds[target] = c.topIds();
            s.promptTopLogprobs[target] = c.topLogprobs();
        }
    }

    private static TokenEvent.PromptLogprobs promptLogprobsOnce(Sequence s) {
        if (s.promptLogprobs == null || s.promptLogprobsSent) {
            return null;
        }
        s.promptLogprobsSent = true;
        return new TokenEvent.PromptLogprobs(s.promptLogprobs, s.promptTopIds, s.promptTopLogprobs);
    }
}

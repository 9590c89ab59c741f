package dev.spindle.engine.sched;

import dev.spindle.backend.ForwardPass;
import dev.spindle.engine.EngineStats;
import dev.spindle.engine.SamplingParams;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.sample.Sampler;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * The engine's step, single-threaded: {@code plan = scheduler.schedule();
 * results = model.forward(windows(plan)); update(plan, results)}. Owned by one thread
 * (the Engine's); tests drive it directly.
 */
public final class EngineCore {
    private final ForwardPass model;
    private final Scheduler scheduler;
    private final Set<Integer> eos;
    private final int maxPositions;
    private long steps, promptTokens, generatedTokens, finished;

    public EngineCore(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds) {
        this.model = model;
        this.scheduler = new Scheduler(model.blockPool(), maxBatchedTokens, maxSequences, model.config().vocabSize());
        this.eos = Set.copyOf(eosIds);
        this.maxPositions = model.config().maxPositions();
    }

    /**
     * Queues a request. Refused up front (IllegalArgumentException) when it cannot fit
     * even alone: longer than the model's context, or more KV blocks than the pool has.
     */
    public void add(long id, int[] prompt, SamplingParams params, TokenSink sink) {
        validate(prompt, params);
        scheduler.add(id, prompt, params, sink, params.seed() != null ? new SplittableRandom(params.seed()) : new SplittableRandom());
        promptTokens += prompt.length;
    }

    /** The up-front checks of {@link #add}; safe from any thread (reads only fixed sizes). */
    public void validate(int[] prompt, SamplingParams params) {
        if (prompt.length == 0) {
            throw new IllegalArgumentException("the prompt is empty");
        }
        for (int t : prompt) {
            if (t < 0 || t >= model.config().vocabSize()) {
                throw new IllegalArgumentException("token id " + t + " is outside the vocabulary [0, " + model.config().vocabSize() + ")");
            }
        }
        long total = (long) prompt.length + params.maxTokens();
        if (prompt.length >= maxPositions) {
            throw new IllegalArgumentException("the prompt has " + prompt.length + " tokens; the model's context is " + maxPositions);
        }
        int bs = model.blockPool().blockSize();
        long blocks = (Math.min(total, maxPositions) + bs - 1) / bs;
        if (blocks > model.blockPool().numBlocks()) {
            throw new IllegalArgumentException("this request needs up to " + blocks + " KV blocks (" + prompt.length + " prompt tokens + max_tokens "
                    + params.maxTokens() + "), more than the pool's " + model.blockPool().numBlocks() + "; lower max_tokens or the prompt");
        }
    }

    /** Stops a request now and frees its blocks; false if it is not here (finished already). */
    public boolean cancel(long id) {
        Sequence s = scheduler.find(id);
        if (s == null) {
            return false;
        }
        scheduler.finish(s);
        finished++;
        return true;
    }

    /** Whether the request is queued and has not yet entered the running batch. */
    public boolean waitingToStart(long id) {
        Sequence s = scheduler.find(id);
        return s != null && !s.started;
    }

    public boolean idle() {
        return scheduler.idle();
    }

    /** Runs one step; returns the plan it ran (empty when idle). */
    public StepPlan step() {
        StepPlan plan = scheduler.schedule();
        if (plan.isEmpty()) {
            return plan;
        }
        List<ForwardPass.Window> windows = new ArrayList<>();
        for (StepPlan.Entry e : plan.entries()) {
            Sequence s = e.sequence();
            boolean scoring = s.promptLogprobs != null && e.from() < s.promptLength;
            windows.add(new ForwardPass.Window(s.tokens(e.from(), e.from() + e.count()), s.table, scoring, e.samples() || scoring));
        }
        // rows the backend draws itself (only ids come back): the plain sampling rule, no logprobs
        List<ForwardPass.Draw> draws = new ArrayList<>();
        boolean onDevice = false;
        for (StepPlan.Entry e : plan.entries()) {
            ForwardPass.Draw d = model.drawsOnDevice() && e.samples() ? deviceDraw(e.sequence(), e.from()) : null;
            draws.add(d);
            onDevice |= d != null;
        }
        int[] drawn = new int[windows.size()];
        // grammar masks depend only on each sequence's text so far: compute them while the forward pass runs
        List<java.util.concurrent.ForkJoinTask<?>> masks = new ArrayList<>();
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && draws.get(i) == null && c != null && !c.unmasked()) {
                masks.add(java.util.concurrent.ForkJoinPool.commonPool().submit(() -> {
                    try {
                        c.prepare();
                    } catch (RuntimeException | StackOverflowError ignored) {
                        // computed again, and reported for this sequence alone, when its row is masked
                    }
                }));
            }
        }
        List<float[][]> results;
        try {
            results = onDevice ? model.forward(windows, draws, drawn) : model.forward(windows);
        } catch (RuntimeException err) {
            masks.forEach(java.util.concurrent.ForkJoinTask::join);
            for (StepPlan.Entry e : plan.entries()) {
                scheduler.finish(e.sequence());
                e.sequence().sink.onError(err);
            }
            return plan;
        }
        steps++;
        masks.forEach(java.util.concurrent.ForkJoinTask::join);
        Throwable[] maskErrors = new Throwable[plan.entries().size()];
        float[][] masked = applyMasks(plan, draws, results, maskErrors);
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            Sequence s = e.sequence();
            scheduler.registerFullBlocks(s);
            float[][] rows = results.get(i);
            if (s.promptLogprobs != null && rows.length == e.count()) {
                recordPromptLogprobs(s, e.from(), rows);
            }
            if (e.samples()) {
                if (s.params.maxTokens() == 0) {
                    scheduler.finish(s);
                    finished++;
                    deliver(s, new TokenEvent(s.id, -1, Double.NaN, new int[0], new double[0], "length", s.promptLength, s.cachedTokens, 0,
                            promptLogprobsOnce(s)));
                } else if (draws.get(i) != null) {
                    emit(s, new Sampler.Choice(drawn[i], Double.NaN, new int[0], new double[0]));
                } else {
                    try {
                        if (maskErrors[i] != null) {
                            throw new IllegalStateException("the grammar could not mask this step: " + maskErrors[i], maskErrors[i]);
                        }
                        sampleAndEmit(s, masked[i] != null ? masked[i] : rows[rows.length - 1], masked[i] != null);
                    } catch (RuntimeException | StackOverflowError err) { // a grammar or sampler failure ends this sequence only
                        scheduler.finish(s);
                        finished++;
                        s.sink.onError(err);
                    }
                }
            }
        }
        return plan;
    }

    /**
     * The draw the backend makes for this sequence's next token, or null when the host must sample
     * (penalties, logit bias, grammar, logprobs, prompt scoring, or nothing to generate). The
     * uniform comes from the sequence's generator exactly as {@link Sampler} would take it.
     */
    private static ForwardPass.Draw deviceDraw(Sequence s, int from) {
        SamplingParams p = s.params;
        // a grammar that masks nothing this step (the model still reasons, or writes free text before a lazy trigger)
        boolean plain = p.maxTokens() > 0 && (s.constraint == null || s.constraint.unmasked()) && p.logitBias().isEmpty() && p.logprobs() < 0
                && p.repetitionPenalty() == 1 && p.presencePenalty() == 0 && p.frequencyPenalty() == 0
                && !(s.promptLogprobs != null && from < s.promptLength);
        if (!plain) {
            return null;
        }
        return new ForwardPass.Draw(p.temperature(), p.topK(), p.topP(), p.minP(), p.temperature() > 0 ? s.rng.nextDouble() : 0);
    }

    /**
     * The masked logits row of each constrained sequence that samples this step (null elsewhere),
     * masked in parallel on the common pool: each row is independent, and at a 166K vocabulary a
     * row's mask takes a good part of a millisecond. The backend's row is masked in place (nothing
     * reads it unmasked afterwards) unless the sequence also scores its prompt from these rows.
     */
    private static float[][] applyMasks(StepPlan plan, List<ForwardPass.Draw> draws, List<float[][]> results, Throwable[] errors) {
        int n = plan.entries().size();
        float[][] masked = new float[n][];
        List<java.util.concurrent.ForkJoinTask<?>> tasks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && draws.get(i) == null && c != null && !c.unmasked() && e.sequence().params.maxTokens() > 0) {
                int index = i;
                float[][] rows = results.get(i);
                tasks.add(java.util.concurrent.ForkJoinPool.commonPool().submit(() -> {
                    try {
                        float[] last = rows[rows.length - 1];
                        float[] m = e.sequence().promptLogprobs == null ? last : last.clone();
                        c.mask(m);
                        masked[index] = m;
                    } catch (RuntimeException | StackOverflowError failure) {
                        errors[index] = failure; // the row may be half masked: this sequence ends with the error, the others go on
                    }
                }));
            }
        }
        tasks.forEach(java.util.concurrent.ForkJoinTask::join);
        return masked;
    }

    /** @param masked whether {@code logits} is already masked by the sequence's grammar (see {@link #applyMasks}) */
    private void sampleAndEmit(Sequence s, float[] logits, boolean masked) {
        float[] row = logits;
        if (s.constraint != null && !s.constraint.unmasked() && !masked) {
            row = logits.clone();
            s.constraint.mask(row);
        }
        emit(s, Sampler.sample(row, s.params, s.counts, s.outputCounts, s.rng));
    }

    private void emit(Sequence s, Sampler.Choice c) {
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
            scheduler.finish(s);
            finished++;
        }
        deliver(s, new TokenEvent(s.id, c.token(), c.logprob(), c.topIds(), c.topLogprobs(), finish, s.promptLength,
                s.cachedTokens, s.generated(), promptLogprobsOnce(s)));
    }

    /** A sink that throws loses its request, never the engine: the sequence is dropped and its blocks freed. */
    private void deliver(Sequence s, TokenEvent e) {
        try {
            s.sink.onToken(e);
        } catch (RuntimeException err) {
            if (scheduler.find(s.id) != null) {
                scheduler.finish(s);
                finished++;
            }
            try {
                s.sink.onError(err);
            } catch (RuntimeException ignored) {
                // the sink is broken; nothing more to tell it
            }
        }
    }

    /** Row r of a prefill chunk starting at {@code from} predicts prompt token from + r + 1. */
    private static void recordPromptLogprobs(Sequence s, int from, float[][] rows) {
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

    public EngineStats stats() {
        var pool = model.blockPool();
        return new EngineStats(scheduler.running(), scheduler.waiting(), pool.numBlocks(), pool.freeBlocks(), pool.cachedBlocks(), steps,
                promptTokens, generatedTokens, scheduler.prefixQueriedTokens, scheduler.prefixHitTokens, scheduler.preemptions, finished);
    }
}

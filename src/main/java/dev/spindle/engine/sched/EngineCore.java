package dev.spindle.engine.sched;

import dev.spindle.engine.EngineStats;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.speculative.DraftPacer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.kv.BlockPool;
import dev.spindle.sample.Sampler;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ForkJoinTask;

/**
 * The engine's step, single-threaded:
 * <pre>
 *   drafts = propose();                 // the proposer's tokens for decoding sequences (speculative decoding)
 *   plan   = scheduler.schedule(drafts);
 *   out    = model.execute(step(plan));
 *   update(plan, out);                  // advance tables, sample or verify, emit, roll back rejected drafts, finish
 * </pre>
 * With asynchronous scheduling ({@code runAhead}) a plain decode step N + 1 is started on the backend before N's tokens
 * are read, its tokens fed on the device from N's draws ({@link ModelStep#fed}); N's update then drops the rows of the
 * sequences N's tokens ended. The tokens each request gets are the same either way.
 * The engine owns the KV block pool and every block table; the backend only reads them. Owned by
 * one thread (the Engine's); tests drive it directly.
 */
public final class EngineCore {
    private final ForwardPass model;
    private final BlockPool pool;
    private final Scheduler scheduler;
    private final int maxPositions;
    private final Speculation spec;
    /** Asynchronous scheduling: steps go through {@link ForwardPass#start}, and plain decode steps start one ahead. */
    private final boolean runAhead;
    private final Emission emission;
    private final Drafting drafting;
    private final RunAhead ahead;
    private long steps, promptTokens, forwardNanos, forwardSteps;
    private int consecutiveFailures;

    public EngineCore(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds) {
        this(model, maxBatchedTokens, maxSequences, eosIds, Speculation.NONE);
    }

    public EngineCore(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, Speculation spec) {
        this(model, maxBatchedTokens, maxSequences, eosIds, spec, false);
    }

    /**
     * @param runAhead asynchronous scheduling: where the backend {@linkplain ForwardPass#runsAhead runs ahead}, start each
     *                 plain decode step before the previous step's tokens reach the host (see {@link #step})
     */
    public EngineCore(ForwardPass model, int maxBatchedTokens, int maxSequences, Set<Integer> eosIds, Speculation spec, boolean runAhead) {
        this.model = model;
        this.runAhead = runAhead;
        this.pool = new BlockPool(model.kvCapacity());
        this.scheduler = new Scheduler(pool, maxBatchedTokens, maxSequences, model.config().vocabSize());
        this.maxPositions = model.config().maxPositions();
        this.spec = spec;
        this.emission = new Emission(scheduler, spec, eosIds, maxPositions);
        this.drafting = new Drafting(spec, model, scheduler, emission, maxPositions);
        this.ahead = new RunAhead(model, scheduler, spec, maxPositions);
    }

    /** The KV block pool (the engine's; the backend holds the bytes of its blocks). */
    public BlockPool pool() {
        return pool;
    }

    /**
     * Queues a request. Refused up front (IllegalArgumentException) when it cannot fit
     * even alone: longer than the model's context, or more KV blocks than the pool has.
     */
    public void add(long id, int[] prompt, SamplingParams params, TokenSink sink) {
        validate(prompt, params);
        Sequence s = scheduler.add(id, prompt, params, sink, params.seed() != null ? new SplittableRandom(params.seed()) : new SplittableRandom());
        if (spec.enabled()) {
            s.pacer = new DraftPacer(spec.numTokens());
        }
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
        int bs = pool.blockSize();
        long blocks = (Math.min(total, maxPositions) + bs - 1) / bs;
        if (blocks > pool.numBlocks()) {
            throw new IllegalArgumentException("this request needs up to " + blocks + " KV blocks (" + prompt.length + " prompt tokens + max_tokens "
                    + params.maxTokens() + "), more than the pool's " + pool.numBlocks() + "; lower max_tokens or the prompt");
        }
    }

    /** Stops a request now and frees its blocks; false if it is not here (finished already). */
    public boolean cancel(long id) {
        Sequence s = scheduler.find(id);
        if (s == null) {
            return false;
        }
        emission.finish(s);
        return true;
    }

    /** Whether the request is queued and has not yet entered the running batch. */
    public boolean waitingToStart(long id) {
        Sequence s = scheduler.find(id);
        return s != null && !s.started;
    }

    public boolean idle() {
        return scheduler.idle() && !ahead.pending();
    }

    /**
     * Runs one step; returns the plan it ran (empty when idle): schedule (with the proposer's drafts), execute, update.
     * Running ahead ({@link #runAhead}), the step this call reads may have been started by the call before, and the next
     * one is started before this one's tokens are read ({@link RunAhead}).
     */
    public StepPlan step() {
        LaunchedStep now = ahead.take();
        if (now == null) {
            StepPlan plan = scheduler.schedule(drafting.propose(steps));
            if (plan.isEmpty()) {
                return plan;
            }
            now = LaunchedStep.launch(model, runAhead, plan, modelStep(plan));
        }
        try {
            if (runAhead) {
                ahead.startAfter(now);
            }
        } finally {
            update(now); // read even when starting the next one threw: a started step is never left pending
        }
        return now.plan();
    }

    /** The backend's step of a plan: each entry's window, tapped where the proposer reads the target's hidden states. */
    private ModelStep modelStep(StepPlan plan) {
        int[] taps = drafting.tapLayers();
        List<ModelStep.Window> windows = new ArrayList<>();
        for (StepPlan.Entry e : plan.entries()) {
            ModelStep.Window w = window(e);
            windows.add(taps.length == 0 ? w : new ModelStep.Window(w.tokens(), w.start(), w.table(), w.logitRows(), w.draw(), true));
        }
        // a head beside the target on its device reads the taps there: they need not come to the host
        return new ModelStep(windows, taps, taps.length == 0 || !drafting.tapsStayOnDevice());
    }

    /** The backend window of a plan entry: its tokens (with drafts), which rows want logits, and the device draw if any. */
    private ModelStep.Window window(StepPlan.Entry e) {
        Sequence s = e.sequence();
        if (e.drafted()) {
            int[] tokens = new int[e.count()];
            tokens[0] = s.tokens[e.from()];
            System.arraycopy(e.drafts(), 0, tokens, 1, e.drafts().length);
            return new ModelStep.Window(tokens, e.from(), s.table, ModelStep.allRows(e.count()), drafting.draw(s, e));
        }
        boolean scoring = s.promptLogprobs != null && e.from() < s.promptLength;
        int[] rows = scoring ? ModelStep.allRows(e.count()) : e.samples() ? ModelStep.lastRow(e.count()) : ModelStep.noRows();
        ModelStep.Draw draw = model.drawsOnDevice() && e.samples() ? DeviceDrawing.next(s, e.from()) : null;
        return new ModelStep.Window(s.tokens(e.from(), e.from() + e.count()), e.from(), s.table, rows, draw);
    }

    /**
     * Reads a launched step's output and applies it: tables advanced, each sampling sequence's token drawn (on the device
     * or here, masked by its grammar), drafted windows verified, tokens emitted, full blocks keyed in the prefix cache, the
     * proposer told the committed rows. A failed forward pass fails the step's requests; a grammar or sampler failure ends
     * its own sequence only.
     */
    private void update(LaunchedStep launched) {
        StepPlan plan = launched.plan();
        List<ModelStep.Window> windows = launched.step().windows();
        boolean tapped = launched.step().tapLayers().length > 0;
        boolean anyDrafts = plan.entries().stream().anyMatch(StepPlan.Entry::drafted);
        long generatedBefore = emission.generatedTokens;
        StepOutput out = await(launched);
        if (out == null) {
            return;
        }
        steps++;
        for (StepPlan.Entry e : plan.entries()) {
            if (!e.sequence().finished) { // a sequence that ended after this step started ahead: its row is dropped
                e.sequence().table.advance(e.from() + e.count());
            }
        }
        launched.masks().forEach(ForkJoinTask::join);
        Throwable[] maskErrors = new Throwable[plan.entries().size()];
        float[][] masked = GrammarMasks.apply(plan, windows, out.logits(), maskErrors);
        List<Drafting.Observed> observed = new ArrayList<>();
        int stepRow = 0; // each window's first row in the step (the rows of the tap buffer)
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            Sequence s = e.sequence();
            int row = stepRow;
            stepRow += windows.get(i).tokens().length;
            if (s.finished) {
                continue; // ended after this step started ahead (a stop token, a stop string, cancelled): its row is dropped
            }
            if (e.drafted()) {
                try {
                    int accepted = drafting.verify(s, e, out.logits().get(i), out.tokens().get(i), steps);
                    Drafting.observe(observed, s, e.from(), out, i, row, tapped, 1 + accepted); // the anchor and the accepted drafts
                } catch (RuntimeException | StackOverflowError err) { // a grammar or sampler failure ends this sequence only
                    emission.fail(s, err);
                }
                continue;
            }
            Drafting.observe(observed, s, e.from(), out, i, row, tapped, e.count());
            scheduler.registerFullBlocks(s);
            sample(s, e, out.logits().get(i), out.tokens().get(i), masked[i], maskErrors[i]);
        }
        drafting.observeAll(observed);
        if (anyDrafts) {
            drafting.draftedStep(System.nanoTime() - launched.t0(), emission.generatedTokens - generatedBefore);
        }
    }

    /** The step's output, or null when the forward pass failed: then each of its live requests fails with the error. */
    private StepOutput await(LaunchedStep launched) {
        boolean live = launched.plan().entries().stream().anyMatch(e -> !e.sequence().finished);
        try {
            StepOutput out = launched.pending().await();
            forwardNanos += System.nanoTime() - launched.t0();
            forwardSteps++;
            consecutiveFailures = 0;
            return out;
        } catch (RuntimeException err) {
            launched.masks().forEach(ForkJoinTask::join);
            if (live) { // a step started ahead for sequences that have all failed since says nothing new about the backend
                consecutiveFailures++;
            }
            for (StepPlan.Entry e : launched.plan().entries()) {
                if (!e.sequence().finished) {
                    emission.fail(e.sequence(), new IllegalStateException("the forward pass failed: " + err.getMessage(), err));
                }
            }
            return null;
        }
    }

    /** A plain window's outcome: its prompt's logprobs where it scores them, and its next token where it samples. */
    private void sample(Sequence s, StepPlan.Entry e, float[][] rows, int[] drawn, float[] masked, Throwable maskError) {
        if (s.promptLogprobs != null && rows.length == e.count()) {
            Emission.recordPromptLogprobs(s, e.from(), rows);
        }
        if (!e.samples()) {
            return;
        }
        if (s.params.maxTokens() == 0) {
            emission.emitNothing(s);
        } else if (drawn != null) {
            emission.emit(s, new Sampler.Choice(drawn[0], Double.NaN, new int[0], new double[0]));
        } else {
            try {
                if (maskError != null) {
                    throw new IllegalStateException("the grammar could not mask this step: " + maskError, maskError);
                }
                emission.sampleAndEmit(s, masked != null ? masked : rows[rows.length - 1], masked != null);
            } catch (RuntimeException | StackOverflowError err) { // a grammar or sampler failure ends this sequence only
                emission.fail(s, err);
            }
        }
    }

    /** Fails every running and waiting request with {@code err} (a fault the engine cannot pin on one request). */
    public void failAll(Throwable err) {
        for (Sequence s : scheduler.all()) {
            emission.fail(s, new IllegalStateException("the engine step failed: " + err, err));
        }
    }

    /** Steps in a row whose forward pass failed (0 after a good one): a backend that keeps failing is unusable. */
    public int consecutiveFailures() {
        return consecutiveFailures;
    }

    public EngineStats stats() {
        return new EngineStats(scheduler.running(), scheduler.waiting(), pool.numBlocks(), pool.freeBlocks(), pool.cachedBlocks(), steps,
                promptTokens, emission.generatedTokens, scheduler.prefixQueriedTokens, scheduler.prefixHitTokens, scheduler.preemptions,
                emission.finished, drafting.stats(forwardNanos, forwardSteps));
    }
}

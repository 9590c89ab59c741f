package dev.spindle.engine.sched;

import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;
import dev.spindle.engine.EngineStats;
import dev.spindle.sample.SamplingParams;
import dev.spindle.engine.SpecStats;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.kv.BlockPool;
import dev.spindle.sample.Sampler;
import dev.spindle.engine.speculative.DraftPacer;
import dev.spindle.engine.speculative.DraftRequest;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;
import dev.spindle.engine.speculative.Speculation;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ForkJoinPool;
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
    private final Set<Integer> eos;
    private final int maxPositions;
    private final Speculation spec;
    /** Asynchronous scheduling: steps go through {@link ForwardPass#start}, and plain decode steps start one ahead. */
    private final boolean runAhead;
    private long steps, promptTokens, generatedTokens, finished;
    private long drafts, draftTokens, acceptedTokens, proposerNanos, draftedStepNanos, draftedSteps, draftedStepTokens, observeNanos, forwardNanos, specSteps;
    private final long[] acceptedAt, acceptedLength;
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
        this.eos = Set.copyOf(eosIds);
        this.maxPositions = model.config().maxPositions();
        this.spec = spec;
        this.acceptedAt = new long[Math.max(0, spec.numTokens())];
        this.acceptedLength = new long[Math.max(0, spec.numTokens()) + 1];
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
        finish(s);
        return true;
    }

    /** Whether the request is queued and has not yet entered the running batch. */
    public boolean waitingToStart(long id) {
        Sequence s = scheduler.find(id);
        return s != null && !s.started;
    }

    public boolean idle() {
        return scheduler.idle() && ahead == null;
    }

    /**
     * Runs one step; returns the plan it ran (empty when idle). Running ahead ({@link #runAhead}), the step whose output this
     * call reads may have been started by the call before, and the next one is started before this one's tokens are read.
     */
    public StepPlan step() {
        Launched now = ahead;
        ahead = null;
        if (now == null) {
            StepPlan plan = scheduler.schedule(propose());
            if (plan.isEmpty()) {
                return plan;
            }
            List<ModelStep.Window> windows = new ArrayList<>();
            int[] taps = tapLayers();
            for (StepPlan.Entry e : plan.entries()) {
                ModelStep.Window w = window(e);
                windows.add(taps.length == 0 ? w : new ModelStep.Window(w.tokens(), w.start(), w.table(), w.logitRows(), w.draw(), true));
            }
            // a head beside the target on its device reads the taps there: they need not come to the host
            now = launch(plan, new ModelStep(windows, taps, taps.length == 0 || !spec.proposer().readsDeviceTaps()));
        }
        StepPlan done;
        try {
            if (runAhead) {
                ahead = launchAhead(now);
            }
        } finally {
            done = complete(now); // read even when starting the next one threw: a started step is never left pending
        }
        return done;
    }

    /** A step started on the backend and not yet read: its plan, what it runs, and its grammar masks being computed meanwhile. */
    private record Launched(StepPlan plan, ModelStep step, ForwardPass.PendingStep pending, List<ForkJoinTask<?>> masks, long t0) {
    }

    /** The step started ahead of the one being read ({@link #runAhead}), or null. */
    private Launched ahead;

    /** Starts a step (running ahead) or runs it (not): either way its output is read by {@link #complete}. */
    private Launched launch(StepPlan plan, ModelStep step) {
        List<ModelStep.Window> windows = step.windows();
        // grammar masks depend only on each sequence's text so far: compute them while the forward pass runs
        List<ForkJoinTask<?>> masks = new ArrayList<>();
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && windows.get(i).draw() == null && c != null && !c.unmasked()) {
                masks.add(ForkJoinPool.commonPool().submit(() -> {
                    try {
                        c.prepare();
                    } catch (RuntimeException | StackOverflowError ignored) {
                        // computed again, and reported for this sequence alone, when its row is masked
                    }
                }));
            }
        }
        long t0 = System.nanoTime();
        ForwardPass.PendingStep pending;
        try {
            if (runAhead) {
                pending = model.start(step);
            } else {
                StepOutput out = model.execute(step);
                pending = () -> out;
            }
        } catch (RuntimeException err) {
            pending = () -> {
                throw err;
            };
        }
        return new Launched(plan, step, pending, masks, t0);
    }

    /**
     * Starts the step after {@code now} before now's tokens reach the host, where the next step is plain to see: every
     * sequence of {@code now} decodes its device-drawn token next (no drafts, taps, grammar or host sampling; nobody
     * waiting who might be admitted; blocks free without preempting; with speculative decoding, more sequences than it
     * drafts for). Its windows take their tokens from now's draws on the
     * device ({@link ModelStep#fed}); a sequence that now's token ends (a stop token, a stop string) is dropped from it when
     * it is read: its row was computed for nothing, and its K/V write lands past the end of a table that is freed. Null
     * when the next step is not plain: it is scheduled once now's tokens are in.
     */
    private Launched launchAhead(Launched now) {
        if (!model.runsAhead() || now.step().tapLayers().length > 0 || scheduler.admissionDue(now.plan().entries().size())
                || now.plan().entries().size() != scheduler.running()) {
            return null;
        }
        AheadStep next = AheadStep.after(now.plan(), now.step().windows(), maxPositions);
        // beside speculative decoding only where the next step would not draft: more sequences decode than its batch (its
        // proposer is then not asked, as propose() would not ask it), and no hidden states are tapped (checked above)
        if (next == null || (spec.enabled() && next.entries().size() <= spec.maxBatch()) || !scheduler.reserveAhead(next.entries())) {
            return null;
        }
        return launch(new StepPlan(next.entries()), new ModelStep(next.windows(), new int[0], true, next.fedRows()));
    }

    /** Reads a launched step's output and applies it (tables advanced, tokens sampled or verified and emitted). */
    private StepPlan complete(Launched launched) {
        StepPlan plan = launched.plan();
        List<ModelStep.Window> windows = launched.step().windows();
        int[] taps = launched.step().tapLayers();
        List<ForkJoinTask<?>> masks = launched.masks();
        StepOutput out;
        boolean anyDrafts = plan.entries().stream().anyMatch(StepPlan.Entry::drafted);
        long t0 = launched.t0(), generatedBefore = generatedTokens;
        boolean live = plan.entries().stream().anyMatch(e -> !e.sequence().finished);
        try {
            out = launched.pending().await();
            forwardNanos += System.nanoTime() - t0;
            specSteps++;
            consecutiveFailures = 0;
        } catch (RuntimeException err) {
            masks.forEach(ForkJoinTask::join);
            if (live) { // a step started ahead for sequences that have all failed since says nothing new about the backend
                consecutiveFailures++;
            }
            for (StepPlan.Entry e : plan.entries()) {
                if (!e.sequence().finished) {
                    fail(e.sequence(), new IllegalStateException("the forward pass failed: " + err.getMessage(), err));
                }
            }
            return plan;
        }
        steps++;
        for (StepPlan.Entry e : plan.entries()) {
            if (!e.sequence().finished) { // a sequence that ended after this step started ahead: its row is dropped
                e.sequence().table.advance(e.from() + e.count());
            }
        }
        masks.forEach(ForkJoinTask::join);
        Throwable[] maskErrors = new Throwable[plan.entries().size()];
        float[][] masked = applyMasks(plan, windows, out.logits(), maskErrors);
        List<Observed> observed = new ArrayList<>();
        int[] stepRow = new int[windows.size()]; // each window's first row in the step (the rows of the tap buffer)
        for (int i = 1; i < windows.size(); i++) {
            stepRow[i] = stepRow[i - 1] + windows.get(i - 1).tokens().length;
        }
        for (int i = 0; i < plan.entries().size(); i++) {
            StepPlan.Entry e = plan.entries().get(i);
            Sequence s = e.sequence();
            if (s.finished) {
                continue; // ended after this step started ahead (a stop token, a stop string, cancelled): its row is dropped
            }
            float[][] rows = out.logits().get(i);
            int[] drawn = out.tokens().get(i);
            if (e.drafted()) {
                try {
                    int accepted = verify(s, e, rows, drawn);
                    observe(observed, s, e.from(), out, i, stepRow[i], taps.length > 0, 1 + accepted); // the anchor and the accepted drafts are committed
                } catch (RuntimeException | StackOverflowError err) { // a grammar or sampler failure ends this sequence only
                    fail(s, err);
                }
                continue;
            }
            observe(observed, s, e.from(), out, i, stepRow[i], taps.length > 0, e.count());
            scheduler.registerFullBlocks(s);
            if (s.promptLogprobs != null && rows.length == e.count()) {
                recordPromptLogprobs(s, e.from(), rows);
            }
            if (e.samples()) {
                if (s.params.maxTokens() == 0) {
                    finish(s);
                    deliver(s, new TokenEvent(s.id, -1, Double.NaN, new int[0], new double[0], "length", s.promptLength, s.cachedTokens, 0,
                            promptLogprobsOnce(s)));
                } else if (drawn != null) {
                    emit(s, new Sampler.Choice(drawn[0], Double.NaN, new int[0], new double[0]));
                } else {
                    try {
                        if (maskErrors[i] != null) {
                            throw new IllegalStateException("the grammar could not mask this step: " + maskErrors[i], maskErrors[i]);
                        }
                        sampleAndEmit(s, masked[i] != null ? masked[i] : rows[rows.length - 1], masked[i] != null);
                    } catch (RuntimeException | StackOverflowError err) { // a grammar or sampler failure ends this sequence only
                        fail(s, err);
                    }
                }
            }
        }
        observeAll(observed);
        if (anyDrafts) {
            // the forward pass's time (the host's verification and sampling included, as in a plain step) and the tokens the step gave
            draftedStepNanos += System.nanoTime() - t0;
            draftedSteps++;
            draftedStepTokens += generatedTokens - generatedBefore;
        }
        return plan;
    }

    /** The target layers the proposer reads (a DFlash head's taps), when the backend can tap them; else none. */
    private int[] tapLayers() {
        if (!spec.enabled() || !model.supportsTaps()) {
            return new int[0];
        }
        return spec.proposer().tapLayers();
    }

    /** A window's committed rows, held until the step's windows are all verified: the proposer takes them at once. */
    private record Observed(Sequence sequence, Observation rows) {
    }

    /**
     * Notes a window's committed rows and their taps for the proposer (one that reads the target's hidden states): the
     * host rows, or (kept on the device) where they sit in the step.
     */
    private static void observe(List<Observed> observed, Sequence s, int from, StepOutput out, int window, int stepRow, boolean tapped, int count) {
        if (s.finished || !tapped) {
            return;
        }
        float[][] rows = out.taps() == null ? null : out.taps().get(window);
        observed.add(new Observed(s, new Observation(s.id, from, rows, rows == null ? count : Math.min(count, rows.length), stepRow)));
    }

    /** Hands the step's committed rows to the proposer in one call (the sequences that finished meanwhile left out). */
    private void observeAll(List<Observed> observed) {
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
        } catch (RuntimeException err) { // a failing proposer costs its drafts, never the requests
            for (Observation o : batch) {
                spec.proposer().release(o.id());
            }
            System.err.println("spindle-engine: the proposer could not take a step's hidden states: " + err);
        }
    }

    /** Fails every running and waiting request with {@code err} (a fault the engine cannot pin on one request). */
    public void failAll(Throwable err) {
        for (Sequence s : scheduler.all()) {
            fail(s, new IllegalStateException("the engine step failed: " + err, err));
        }
    }

    /** Steps in a row whose forward pass failed (0 after a good one): a backend that keeps failing is unusable. */
    public int consecutiveFailures() {
        return consecutiveFailures;
    }

    /** The backend window of a plan entry: its tokens (with drafts), which rows want logits, and the device draw if any. */
    private ModelStep.Window window(StepPlan.Entry e) {
        Sequence s = e.sequence();
        if (e.drafted()) {
            int[] tokens = new int[e.count()];
            tokens[0] = s.tokens[e.from()];
            System.arraycopy(e.drafts(), 0, tokens, 1, e.drafts().length);
            return new ModelStep.Window(tokens, e.from(), s.table, ModelStep.allRows(e.count()), draftedDraw(s, e));
        }
        boolean scoring = s.promptLogprobs != null && e.from() < s.promptLength;
        int[] rows = scoring ? ModelStep.allRows(e.count()) : e.samples() ? ModelStep.lastRow(e.count()) : ModelStep.noRows();
        ModelStep.Draw draw = model.drawsOnDevice() && e.samples() ? deviceDraw(s, e.from()) : null;
        return new ModelStep.Window(s.tokens(e.from(), e.from() + e.count()), e.from(), s.table, rows, draw);
    }

    /**
     * The device draws that verify a drafted window, or null when the host must (see {@link #verify}): against deterministic
     * drafts (q one-hot, or greedy) verification only needs each row's token by plain decoding's rule, row j drawn with the
     * uniform plain decoding would give that position (read ahead, consumed as rows emit). Never under a grammar, even one
     * that masks nothing now: it may switch on inside the window (at </think>, or at <tool_call> under auto); never against
     * a sampled proposer's q, which the host's rule takes.
     */
    private ModelStep.Draw draftedDraw(Sequence s, StepPlan.Entry e) {
        SamplingParams p = s.params;
        if (!model.drawsOnDevice() || s.constraint != null || !deviceDrawable(s, e.from()) || (p.temperature() > 0 && s.draftQ != null)) {
            return null;
        }
        return draw(p, p.temperature() > 0 ? s.rng.peekDoubles(e.count()) : new double[e.count()]);
    }

    /**
     * Asks the proposer for drafts for the sequences that decode this step, each as many as its
     * pacer wants (at most what is left of its max_tokens and the context, less the target's own
     * token). None when speculation is off, or when more sequences decode than the drafting batch.
     */
    private Map<Sequence, int[]> propose() {
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
            int want = s.pacer.next(steps);
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
        } catch (RuntimeException err) { // a failing proposer costs its drafts, never the requests
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
                out.put(asked.get(i), d.length > requests.get(i).maxTokens() ? java.util.Arrays.copyOf(d, requests.get(i).maxTokens()) : d);
            }
        }
        return out;
    }

    /**
     * Verifies a drafted window row by row, exactly as plain decoding would choose each token: row j
     * (masked by the grammar in its state after the tokens before it) gives the target's token for
     * the position of draft j; the draft is accepted when the verifier says so (greedy: it equals the
     * token plain greedy chooses), and the first rejection emits the verifier's correction and ends
     * the window; if every draft is accepted the last row gives one more token. Rejected positions are
     * cut from the table, so their K/V are never read or published to the prefix cache.
     */
    private int verify(Sequence s, StepPlan.Entry e, float[][] rows, int[] drawn) {
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
                restrict(s, row);
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
            emit(s, c);
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
        s.pacer.record(steps, d.length, accepted);
        if (!s.finished) {
            s.table.truncate(e.from() + 1 + accepted);
            scheduler.registerFullBlocks(s);
        }
        return accepted;
    }

    /** Ends a sequence (finished, cancelled or failed): out of the scheduler, its blocks and proposer state freed. */
    private void finish(Sequence s) {
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

    private void fail(Sequence s, Throwable err) {
        finish(s);
        try {
            s.sink.onError(err);
        } catch (RuntimeException ignored) {
            // the sink is broken; nothing more to tell it
        }
    }

    /**
     * The draw the backend makes for this sequence's next token, or null when the host must sample
     * (penalties, logit bias, grammar, logprobs, prompt scoring, or nothing to generate). The
     * uniform comes from the sequence's generator exactly as {@link Sampler} would take it.
     */
    private static ModelStep.Draw deviceDraw(Sequence s, int from) {
        SamplingParams p = s.params;
        if (!deviceDrawable(s, from)) {
            return null;
        }
        return draw(p, new double[]{p.temperature() > 0 ? s.rng.nextDouble() : 0});
    }

    /** The device draw of a request's settings, one uniform a wanted row (a greedy draw reads none: the device takes the argmax at T 0). */
    static ModelStep.Draw draw(SamplingParams p, double[] u) {
        return new ModelStep.Draw(p.temperature(), p.topK(), p.topP(), p.minP(), u);
    }

    /** Whether plain sampling's rule alone chooses this sequence's tokens (what the device can draw). */
    private static boolean deviceDrawable(Sequence s, int from) {
        return deviceDrawable(s, from, s.generated());
    }

    /** {@link #deviceDrawable(Sequence, int)} once the sequence has generated {@code generated} tokens. */
    static boolean deviceDrawable(Sequence s, int from, int generated) {
        SamplingParams p = s.params;
        // a grammar that masks nothing this step (the model still reasons, or writes free text before a lazy trigger)
        return p.maxTokens() > 0 && (s.constraint == null || s.constraint.unmasked()) && p.logitBias().isEmpty() && p.logprobs() < 0
                && !p.rules().active(generated)
                && p.repetitionPenalty() == 1 && p.presencePenalty() == 0 && p.frequencyPenalty() == 0
                && !(s.promptLogprobs != null && from < s.promptLength);
    }

    /**
     * The masked logits row of each constrained sequence that samples this step (null elsewhere),
     * masked in parallel on the common pool: each row is independent, and at a 166K vocabulary a
     * row's mask takes a good part of a millisecond. The backend's row is masked in place (nothing
     * reads it unmasked afterwards) unless the sequence also scores its prompt from these rows.
     */
    private static float[][] applyMasks(StepPlan plan, List<ModelStep.Window> windows, List<float[][]> results, Throwable[] errors) {
        int n = plan.entries().size();
        float[][] masked = new float[n][];
        List<java.util.concurrent.ForkJoinTask<?>> tasks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StepPlan.Entry e = plan.entries().get(i);
            var c = e.sequence().constraint;
            if (e.samples() && !e.drafted() && windows.get(i).draw() == null && c != null && !c.unmasked() && e.sequence().params.maxTokens() > 0) {
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
        if (s.params.rules().active(s.generated())) {
            row = row == logits && !masked ? logits.clone() : row;
            restrict(s, row);
        }
        emit(s, Sampler.sample(row, s.params, s.counts, s.outputCounts, s.rng));
    }

    /** The request's token rules (min_tokens, allowed_token_ids, bad_words), masked into its next token's row. */
    private void restrict(Sequence s, float[] row) {
        var rules = s.params.rules();
        if (!rules.active(s.generated())) {
            return;
        }
        java.util.Set<Integer> ends = new java.util.HashSet<>(s.params.stopTokenIds());
        if (!s.params.ignoreEos()) {
            ends.addAll(eos);
        }
        rules.apply(row, s.tokens, s.promptLength, s.generated(), ends);
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
            finish(s);
        }
        deliver(s, new TokenEvent(s.id, c.token(), c.logprob(), c.topIds(), c.topLogprobs(), finish, s.promptLength,
                s.cachedTokens, s.generated(), promptLogprobsOnce(s)));
    }

    /** A sink that throws loses its request, never the engine: the sequence is dropped and its blocks freed. */
    private void deliver(Sequence s, TokenEvent e) {
        try {
            s.sink.onToken(e);
        } catch (RuntimeException err) {
            fail(s, err);
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
        SpecStats sp = spec.enabled() ? new SpecStats(drafts, draftTokens, acceptedTokens, acceptedAt.clone(), acceptedLength.clone(),
                proposerNanos, draftedStepNanos, draftedSteps, draftedStepTokens, observeNanos, forwardNanos, specSteps) : SpecStats.NONE;
        return new EngineStats(scheduler.running(), scheduler.waiting(), pool.numBlocks(), pool.freeBlocks(), pool.cachedBlocks(), steps,
                promptTokens, generatedTokens, scheduler.prefixQueriedTokens, scheduler.prefixHitTokens, scheduler.preemptions, finished, sp);
    }
}

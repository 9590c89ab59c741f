package dev.spindle.engine.sched;

import dev.spindle.Trials;
import dev.spindle.backend.ForwardingPass;
import dev.spindle.engine.speculative.NgramProposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Asynchronous scheduling (EngineCore's runAhead) against the engine without it, on the llama-gqa fixture with draws made
 * "on the device" by the host rule ({@link DeviceDrawWiringTest.HostRuleDrawing}) and a backend that runs ahead as the GPU
 * does ({@link RunAheadPass}): any mix of greedy and sampled requests (some sampled on the host, which stops the running
 * ahead while they decode), stop tokens that end requests while a step is already started for them, max_tokens, late
 * arrivals, few sequence slots and few KV blocks (preemption) gives every request the same tokens, and every block back.
 */
class AsyncSchedulingPropertyTest {
    @BeforeAll
    static void load() {
        EngineCoreTest.load();
    }

    @AfterAll
    static void close() {
        EngineCoreTest.close();
    }

    /** A request of a scenario: its prompt, settings and the engine step (call) before which it arrives. */
    record Request(int[] prompt, SamplingParams params, int arrival) {
    }

    /** Requests and the engine's limits: its token budget a step, sequence slots, and (CPU) KV blocks. */
    record Scenario(List<Request> requests, int budget, int maxSeqs, int blocks) {
    }

    /** One run's outcome: per request its events, and the steps started with fed tokens (ahead of the one before). */
    record Outcome(Map<Integer, EngineCoreTest.Collect> replies, int fedSteps) {
    }

    /** Counts the steps started with tokens fed from the previous step's draws. */
    static final class Counting extends ForwardingPass {
        int fed;

        Counting(ForwardPass inner) {
            super(inner);
        }

        @Override
        public PendingStep start(ModelStep step) {
            fed += step.feeds() ? 1 : 0;
            return inner.start(step);
        }
    }

    /** The CPU pass drawing "on the device" by the host rule, running ahead or not. */
    static ForwardPass cpu(boolean async, int blocks) {
        var drawing = new DeviceDrawWiringTest.HostRuleDrawing(EngineCoreTest.cpu(blocks));
        return async ? new RunAheadPass(drawing) : drawing;
    }

    /** Runs the scenario's requests on an engine over {@code pass} (closed afterwards), cancelling each of cancelAt's at its step. */
    static Outcome run(ForwardPass pass, boolean async, Scenario sc, Map<Integer, Integer> cancelAt) {
        return run(pass, async, sc, cancelAt, Speculation.NONE);
    }

    static Outcome run(ForwardPass pass, boolean async, Scenario sc, Map<Integer, Integer> cancelAt, Speculation spec) {
        List<Request> requests = sc.requests();
        try (Counting counted = new Counting(pass)) {
            EngineCore core = new EngineCore(counted, sc.budget(), sc.maxSeqs(), Set.of(2), spec, async);
            Map<Integer, EngineCoreTest.Collect> replies = new HashMap<>();
            int added = 0, step = 0;
            while (added < requests.size() || !core.idle()) {
                for (int i = 0; i < requests.size(); i++) {
                    if (requests.get(i).arrival() == step) {
                        EngineCoreTest.Collect c = new EngineCoreTest.Collect();
                        replies.put(i, c);
                        core.add(i, requests.get(i).prompt(), requests.get(i).params(), c);
                        added++;
                    }
                }
                for (var e : cancelAt.entrySet()) {
                    if (e.getValue() == step) {
                        core.cancel(e.getKey());
                    }
                }
                if (!core.idle()) {
                    core.step();
                }
                step++;
                assertTrue(step < 5_000, "the engine finishes");
            }
            assertEquals(core.pool().numBlocks(), core.pool().freeBlocks(), "all blocks back");
            return new Outcome(replies, counted.fed);
        }
    }

    static Outcome runOnCpu(boolean async, Scenario sc, Map<Integer, Integer> cancelAt) {
        return run(cpu(async, sc.blocks()), async, sc, cancelAt);
    }

    static SamplingParams params(double t, long seed, int max, Set<Integer> stops, boolean ignoreEos, int logprobs) {
        return new SamplingParams(t, t > 0 ? 40 : 0, t > 0 ? 0.95 : 1, 0, seed, 0, 0, 1, Map.of(), max, stops, ignoreEos, logprobs, null, -1);
    }

    static int[] prompt(SplittableRandom r) {
        if (r.nextInt(3) == 0) {
            return EngineCoreTest.f.prompts.get(r.nextInt(EngineCoreTest.f.prompts.size()));
        }
        return r.ints(1 + r.nextInt(70), 3, 512).toArray();
    }

    /**
     * A random scenario: 1-8 requests greedy or sampled at T 0.6 / 1.0 (one in six with logprobs, so sampled on the host),
     * max_tokens 1-24, some arriving late, budget 16 / 64 / 512 tokens, 1-8 slots, 12-71 blocks of 16.
     */
    static Scenario scenario(SplittableRandom r) {
        int n = 1 + r.nextInt(8), budget = List.of(16, 64, 512).get(r.nextInt(3)), maxSeqs = 1 + r.nextInt(8), blocks = 12 + r.nextInt(60);
        double[] temps = {0, 0.6, 1.0};
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            requests.add(new Request(prompt(r), params(temps[r.nextInt(3)], r.nextLong(), 1 + r.nextInt(24), Set.of(), r.nextBoolean(),
                    r.nextInt(6) == 0 ? 0 : -1), r.nextInt(3) == 0 ? r.nextInt(12) : 0));
        }
        return new Scenario(requests, budget, maxSeqs, blocks);
    }

    /** The scenario with stop tokens that end requests midway: for about half, a token the reference run gave it. */
    static Scenario withStops(Scenario sc, Outcome reference, SplittableRandom r) {
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < sc.requests().size(); i++) {
            Request q = sc.requests().get(i);
            var events = reference.replies().get(i).events;
            Set<Integer> stops = events.isEmpty() || r.nextBoolean() ? Set.of() : Set.of(events.get(r.nextInt(events.size())).token());
            SamplingParams p = q.params();
            requests.add(new Request(q.prompt(), params(p.temperature(), p.seed(), p.maxTokens(), stops, p.ignoreEos(), p.logprobs()), q.arrival()));
        }
        return new Scenario(requests, sc.budget(), sc.maxSeqs(), sc.blocks());
    }

    @Test
    void everyRequestGetsTheSameTokensRunningAhead() {
        Trials.run(40, AsyncSchedulingPropertyTest::everyRequestGetsTheSameTokensRunningAhead);
    }

    static void everyRequestGetsTheSameTokensRunningAhead(SplittableRandom r) {
        Scenario plain = scenario(r);
        Scenario sc = withStops(plain, runOnCpu(false, plain, Map.of()), r);
        Outcome sync = runOnCpu(false, sc, Map.of()), async = runOnCpu(true, sc, Map.of());
        String input = Trials.describe(sc);
        for (int i = 0; i < sc.requests().size(); i++) {
            assertNull(async.replies().get(i).error, "request " + i + " failed");
            assertEquals(sync.replies().get(i).signature(), async.replies().get(i).signature(), "request " + i + " of " + input);
        }
    }

    /**
     * Beside speculative decoding (prompt lookup, drafting while at most two sequences decode): the steps of more sequences
     * start ahead, the drafted ones do not, and every request gets the same tokens as without running ahead.
     */
    @Test
    void besidePromptLookupEveryRequestGetsTheSameTokens() {
        Trials.run(15, AsyncSchedulingPropertyTest::besidePromptLookupEveryRequestGetsTheSameTokens);
    }

    static void besidePromptLookupEveryRequestGetsTheSameTokens(SplittableRandom r) {
        Scenario plain = scenario(r);
        // more sequences than the drafting batch, so that some steps may start ahead
        List<Request> requests = new ArrayList<>(plain.requests());
        while (requests.size() < 4) {
            requests.add(new Request(prompt(r), params(r.nextBoolean() ? 0 : 0.6, r.nextLong(), 1 + r.nextInt(24), Set.of(), true, -1), 0));
        }
        Scenario sc = new Scenario(requests, plain.budget(), Math.max(3, plain.maxSeqs()), Math.max(40, plain.blocks()));
        java.util.function.Supplier<Speculation> lookup = () -> new Speculation(new NgramProposer(1, 3, 0), 3, 2);
        Outcome sync = run(cpu(false, sc.blocks()), false, sc, Map.of(), lookup.get());
        Outcome async = run(cpu(true, sc.blocks()), true, sc, Map.of(), lookup.get());
        String input = Trials.describe(sc);
        for (int i = 0; i < requests.size(); i++) {
            assertNull(async.replies().get(i).error, "request " + i + " failed");
            assertEquals(sync.replies().get(i).signature(), async.replies().get(i).signature(), "request " + i + " of " + input);
        }
    }

    @Test
    void stepsOfMoreSequencesThanTheDraftingBatchStartAhead() {
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            requests.add(new Request(EngineCoreTest.f.prompts.get(i % 3), params(i % 2 == 0 ? 0 : 0.6, 21 + i, 12 + 4 * i, Set.of(), true, -1), 0));
        }
        Scenario sc = new Scenario(requests, 512, 8, 64);
        Outcome async = run(cpu(true, 64), true, sc, Map.of(), new Speculation(new NgramProposer(1, 3, 0), 3, 2));
        // after the prompts' step, four decode tokens 2-12 (11 steps started ahead, the last one's row for request 0 dropped),
        // three decode tokens 13-16 (4 more); from then on two decode, which prompt lookup drafts for: none started ahead
        assertEquals(15, async.fedSteps(), "steps started ahead");
    }

    @Test
    void aRequestWaitingForBlocksDoesNotStopTheOthersRunningAhead() {
        // three different 64-token prompts of 16 tokens each (5 blocks of 16 a request) in a pool of 11 blocks: two run, the
        // third waits for blocks that only a finished request gives back; meanwhile the two start their steps ahead
        SplittableRandom r = new SplittableRandom(3);
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            requests.add(new Request(r.ints(64, 3, 512).toArray(), params(0.6, 31 + i, 16, Set.of(), true, -1), 0));
        }
        Scenario sc = new Scenario(requests, 512, 8, 11);
        Outcome sync = runOnCpu(false, sc, Map.of()), async = runOnCpu(true, sc, Map.of());
        for (int i = 0; i < 3; i++) {
            assertEquals(sync.replies().get(i).signature(), async.replies().get(i).signature(), "request " + i);
        }
        assertTrue(async.fedSteps() >= 20, "steps started ahead while one request waits for blocks: " + async.fedSteps());
    }

    @Test
    void plainDecodingRunsAheadAndStopsWhereTheTokensSay() {
        List<Request> plain = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            plain.add(new Request(EngineCoreTest.f.prompts.get(i % 3), params(i % 2 == 0 ? 0 : 0.6, 11 + i, 20, Set.of(), true, -1), 0));
        }
        Outcome reference = runOnCpu(false, new Scenario(plain, 512, 8, 64), Map.of());
        // request 0 stops at its 5th token (an earlier equal token would stop it sooner: the reference says where)
        int stop = reference.replies().get(0).events.get(4).token();
        List<Request> requests = new ArrayList<>(plain);
        requests.set(0, new Request(plain.get(0).prompt(), params(0, 11, 20, Set.of(stop), true, -1), 0));
        Scenario sc = new Scenario(requests, 512, 8, 64);
        Outcome sync = runOnCpu(false, sc, Map.of()), async = runOnCpu(true, sc, Map.of());
        for (int i = 0; i < 4; i++) {
            assertEquals(sync.replies().get(i).signature(), async.replies().get(i).signature(), "request " + i);
        }
        var first = async.replies().get(0).events;
        assertEquals("stop", first.getLast().finishReason());
        assertTrue(first.size() <= 5);
        // the prompts' prefill, then (nearly) every decode step started ahead of the one before
        assertTrue(async.fedSteps() >= 15, "steps started ahead: " + async.fedSteps());
    }

    /** A backend whose n-th started step fails when it is read (as a GPU fault surfaces at the wait). */
    static final class FailingRead extends ForwardingPass {
        private final int failAt;
        private int started;

        FailingRead(ForwardPass inner, int failAt) {
            super(inner);
            this.failAt = failAt;
        }

        @Override
        public PendingStep start(ModelStep step) {
            PendingStep p = inner.start(step);
            if (++started != failAt) {
                return p;
            }
            return () -> {
                p.await();
                throw new IllegalStateException("injected fault");
            };
        }
    }

    @Test
    void aStepThatFailsWhenReadFailsItsRequestsAndTheEngineGoesOn() {
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            requests.add(new Request(EngineCoreTest.f.prompts.get(i), params(i == 0 ? 0 : 0.6, 5 + i, 12, Set.of(), true, -1), 0));
        }
        requests.add(new Request(EngineCoreTest.f.prompts.get(1), params(0, 9, 12, Set.of(), true, -1), 30)); // arrives after the fault
        Scenario sc = new Scenario(requests, 512, 8, 64);
        Outcome whole = runOnCpu(true, sc, Map.of());
        Outcome failed = run(new FailingRead(cpu(true, sc.blocks()), 5), true, sc, Map.of());
        for (int i = 0; i < 3; i++) {
            EngineCoreTest.Collect c = failed.replies().get(i);
            assertTrue(c.error != null && c.error.getMessage().contains("injected fault"), "request " + i + " fails with the step");
            for (int j = 0; j < c.events.size(); j++) {
                assertEquals(whole.replies().get(i).events.get(j).token(), c.events.get(j).token(), "request " + i + " token " + j);
            }
        }
        assertEquals(whole.replies().get(3).signature(), failed.replies().get(3).signature(), "a later request is served as before");
    }

    @Test
    void aRequestCancelledWhileAStepIsStartedForItEndsCleanly() {
        List<Request> requests = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            requests.add(new Request(EngineCoreTest.f.prompts.get(i), params(0.6, 5 + i, 16, Set.of(), true, -1), 0));
        }
        Scenario sc = new Scenario(requests, 512, 8, 64);
        Outcome whole = runOnCpu(true, sc, Map.of());
        Outcome cancelled = runOnCpu(true, sc, Map.of(1, 6));
        var cut = cancelled.replies().get(1).events;
        assertNull(cancelled.replies().get(1).error);
        assertTrue(cut.size() < 16, "cancelled midway");
        for (int j = 0; j < cut.size(); j++) {
            assertEquals(whole.replies().get(1).events.get(j).token(), cut.get(j).token(), "token " + j);
        }
        for (int i : List.of(0, 2)) {
            assertEquals(whole.replies().get(i).signature(), cancelled.replies().get(i).signature(), "request " + i);
        }
    }
}

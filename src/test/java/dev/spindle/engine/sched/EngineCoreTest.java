package dev.spindle.engine.sched;

import dev.spindle.Fixture;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.engine.EngineStats;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The engine's invariants on a real model (the llama-gqa fixture): a request's tokens and
 * logprobs are identical alone, beside others, after a prefix-cache hit and after being
 * preempted; cancelled and finished requests give every block back.
 */
class EngineCoreTest {
    static Fixture f;

    @BeforeAll
    static void load() {
        f = new Fixture("llama-gqa");
    }

    @AfterAll
    static void close() {
        f.close();
    }

    static class Collect implements TokenSink {
        final List<TokenEvent> events = new ArrayList<>();
        Throwable error;

        @Override
        public void onToken(TokenEvent e) {
            events.add(e);
        }

        @Override
        public void onError(Throwable t) {
            error = t;
        }

        String signature() {
            StringBuilder b = new StringBuilder();
            for (TokenEvent e : events) {
                b.append(e.token()).append('/').append(Double.doubleToLongBits(e.logprob())).append(',');
            }
            return b.toString();
        }

        boolean done() {
            return error != null || (!events.isEmpty() && events.getLast().finishReason() != null);
        }
    }

    static SamplingParams sampled(long seed, int max) {
        return new SamplingParams(0.8, 40, 0.95, 0.02, seed, 0.1, 0.1, 1.05, Map.of(7, 1.5), max, Set.of(), true, 3, null, -1);
    }

    static SamplingParams greedy(int max) {
        return new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), max, Set.of(), true, 2, null, -1);
    }

    /** Runs requests to completion on one engine; returns each one's collected events. */
    static Map<String, Collect> run(ForwardPass cpu, int budget, Map<String, int[]> prompts, Map<String, SamplingParams> params) {
        EngineCore core = new EngineCore(cpu, budget, 8, Set.of(2));
        Map<String, Collect> out = new LinkedHashMap<>();
        long id = 0;
        for (var e : prompts.entrySet()) {
            Collect c = new Collect();
            out.put(e.getKey(), c);
            core.add(++id, e.getValue(), params.get(e.getKey()), c);
        }
        int guard = 0;
        while (!core.idle() && guard++ < 10_000) {
            core.step();
        }
        assertTrue(core.idle());
        assertEquals(core.pool().numBlocks(), core.pool().freeBlocks(), "all blocks back");
        return out;
    }

    static CpuForwardPass cpu(int blocks) {
        return new CpuForwardPass(f.model.config(), f.model.weights(), blocks, 16, 2, KvSlots.PER_EXECUTED_LAYER);
    }

    @Test
    void requestsGiveIdenticalTokensAndLogprobsAloneOrInABatch() {
        int[] a = f.prompts.get(1), b = f.prompts.get(2), c = f.prompts.get(0);
        Map<String, SamplingParams> params = Map.of("a", sampled(42, 24), "b", greedy(20), "c", sampled(7, 30));
        Map<String, String> solo = new LinkedHashMap<>();
        for (String k : List.of("a", "b", "c")) {
            try (CpuForwardPass cpu = cpu(64)) {
                int[] p = k.equals("a") ? a : k.equals("b") ? b : c;
                solo.put(k, run(cpu, 512, Map.of(k, p), params).get(k).signature());
            }
        }
        try (CpuForwardPass cpu = cpu(64)) {
            // a small budget forces chunked prefill interleaved with the others' decoding
            Map<String, Collect> together = run(cpu, 24, new LinkedHashMap<>(Map.of("a", a, "b", b, "c", c)), params);
            for (String k : List.of("a", "b", "c")) {
                assertEquals(solo.get(k), together.get(k).signature(), k + " alone vs batched");
            }
        }
    }

    @Test
    void prefixCacheHitsGiveIdenticalResultsAndAreCounted() {
        int[] shared = f.prompts.get(2);
        int[] second = Arrays.copyOf(shared, shared.length + 3);
        second[shared.length] = 5;
        second[shared.length + 1] = 6;
        second[shared.length + 2] = 7;
        String fresh;
        try (CpuForwardPass cpu = cpu(64)) {
            fresh = run(cpu, 512, Map.of("s", second), Map.of("s", greedy(16))).get("s").signature();
        }
        try (CpuForwardPass cpu = cpu(64)) {
            EngineCore core = new EngineCore(cpu, 512, 8, Set.of(2));
            Collect first = new Collect(), again = new Collect();
            core.add(1, shared, greedy(4), first);
            while (!core.idle()) {
                core.step();
            }
            core.add(2, second, greedy(16), again);
            while (!core.idle()) {
                core.step();
            }
            EngineStats st = core.stats();
            assertEquals(fresh, again.signature(), "a prefix-cache hit changes nothing");
            assertEquals(64, again.events.getFirst().cachedTokens(), "four full blocks of the shared prompt come from the cache");
            assertTrue(st.prefixHitRate() > 0.5, "hit rate " + st.prefixHitRate());
            System.out.printf("[engine] prefix cache: %d of %d looked-up prompt tokens hit (%.0f%%)%n", st.prefixHitTokens(),
                    st.prefixQueriedTokens(), 100 * st.prefixHitRate());
        }
    }

    @Test
    void preemptionWhenBlocksRunOutRecomputesExactly() {
        int[] a = f.prompts.get(2), b = f.prompts.get(1);
        Map<String, SamplingParams> params = Map.of("a", sampled(1, 40), "b", sampled(2, 40));
        Map<String, String> solo = new LinkedHashMap<>();
        for (String k : List.of("a", "b")) {
            try (CpuForwardPass cpu = cpu(64)) {
                solo.put(k, run(cpu, 512, Map.of(k, k.equals("a") ? a : b), params).get(k).signature());
            }
        }
        try (CpuForwardPass cpu = cpu(8)) { // 128 tokens of KV: a (64+40) and b (33+40) cannot both stay
            EngineCore core = new EngineCore(cpu, 512, 8, Set.of(2));
            Collect ca = new Collect(), cb = new Collect();
            core.add(1, a, params.get("a"), ca);
            core.add(2, b, params.get("b"), cb);
            while (!core.idle()) {
                core.step();
            }
            assertTrue(core.stats().preemptions() > 0, "the pool is too small for both: one was preempted");
            assertEquals(solo.get("a"), ca.signature());
            assertEquals(solo.get("b"), cb.signature());
            assertEquals(8, core.pool().freeBlocks());
        }
    }

    @Test
    void cancelFreesBlocksAndOversizedRequestsAreRefused() {
        try (CpuForwardPass cpu = cpu(8)) {
            EngineCore core = new EngineCore(cpu, 512, 8, Set.of(2));
            Collect c = new Collect();
            core.add(1, f.prompts.get(2), greedy(50), c);
            core.step();
            core.step();
            assertTrue(core.pool().freeBlocks() < 8);
            assertTrue(core.cancel(1));
            assertTrue(core.idle());
            assertEquals(8, core.pool().freeBlocks());
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> core.add(2, f.prompts.get(2), greedy(200), new Collect()));
            assertTrue(e.getMessage().contains("KV blocks"), e.getMessage());
        }
    }

    /** A sink that throws loses its own request only: the others finish, every block comes back. */
    @Test
    void aThrowingSinkDoesNotDisturbOthers() {
        try (CpuForwardPass cpu = cpu(64)) {
            EngineCore core = new EngineCore(cpu, 512, 8, Set.of(2));
            Collect good = new Collect();
            Collect bad = new Collect() {
                @Override
                public void onToken(TokenEvent e) {
                    throw new IllegalStateException("client bug");
                }
            };
            core.add(1, f.prompts.get(1), greedy(10), bad);
            core.add(2, f.prompts.get(2), greedy(10), good);
            int guard = 0;
            while (!core.idle() && guard++ < 1000) {
                core.step();
            }
            assertTrue(core.idle());
            assertEquals(10, good.events.size());
            assertNotNull(bad.error);
            assertEquals(64, core.pool().freeBlocks());
        }
    }

    @Test
    void seededSamplingRepeats() {
        String one, two;
        try (CpuForwardPass cpu = cpu(64)) {
            one = run(cpu, 512, Map.of("x", f.prompts.get(0)), Map.of("x", sampled(99, 30))).get("x").signature();
        }
        try (CpuForwardPass cpu = cpu(64)) {
            two = run(cpu, 512, Map.of("x", f.prompts.get(0)), Map.of("x", sampled(99, 30))).get("x").signature();
        }
        assertEquals(one, two);
        assertNotNull(one);
    }
}

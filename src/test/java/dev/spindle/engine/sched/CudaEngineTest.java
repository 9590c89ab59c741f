package dev.spindle.engine.sched;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.Fixture;
import dev.spindle.backend.cpu.HfParityTest;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.backend.cuda.CudaPasses;
import dev.spindle.backend.cuda.RequiresGpu;
import dev.spindle.backend.cuda.TensorParallelCudaTest;
import dev.spindle.engine.ChatModelParityTest;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.sample.SamplingParams;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The engine and scheduler driving the CUDA backend: requests sampled and greedy, alone or
 * batched under a small token budget (chunked prefill mixed with other sequences' decode steps in
 * one forward step), give identical tokens and logprobs; and the bundled chat model's greedy
 * replies equal HF's.
 */
@RequiresGpu
class CudaEngineTest {
    static CudaForwardPass cuda(LoadedModel m) {
        return CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 512, 0.1, 256, true).withKernels(dev.spindle.backend.cuda.RequiresGpu.KERNELS), LoadListener.NONE);
    }

    @Test
    void requestsGiveIdenticalResultsAloneOrBatchedOnTheGpu() {
        try (Fixture f = new Fixture("llama-gqa")) {
            aloneEqualsBatched(f, Map.of("a", EngineCoreTest.sampled(42, 24), "b", EngineCoreTest.greedy(20), "c", EngineCoreTest.sampled(7, 30)));
            System.out.println("[cuda engine] three requests (two sampled, one greedy) alone = batched with chunked prefill, tokens and logprobs");
        }
    }

    /** Requests without penalties, bias or logprobs are drawn on the device (only ids come back). */
    @Test
    void tokensDrawnOnTheGpuAreTheSameAloneOrBatched() {
        try (Fixture f = new Fixture("llama-gqa")) {
            Map<String, EngineCoreTest.Collect> solo = aloneEqualsBatched(f,
                    Map.of("a", DeviceDrawWiringTest.plain(0.9, 42L, 24), "b", DeviceDrawWiringTest.plain(0, null, 20),
                            "c", DeviceDrawWiringTest.plain(1.3, 7L, 30), "d", EngineCoreTest.sampled(5, 16)));
            // greedy drawn on the device = greedy sampled on the host from the copied logits
            Map<String, EngineCoreTest.Collect> host;
            try (CudaForwardPass gpu = cuda(f.model)) {
                host = EngineCoreTest.run(gpu, 512, Map.of("b", f.prompts.get(2)), Map.of("b", EngineCoreTest.greedy(20)));
            }
            assertEquals(tokens(host.get("b")), tokens(solo.get("b")), "greedy on the device vs on the host");
            System.out.println("[cuda engine] tokens drawn on the GPU (top-k/top-p/min-p, greedy) alone = batched with a host-sampled request;"
                    + " device greedy = host greedy");
        }
    }

    /**
     * Asynchronous scheduling on the GPU: each plain decode step started before the previous step's ids reach the host, its
     * tokens fed on the device (feed_tokens) from that step's argmax or sample draws; AsyncSchedulingPropertyTest's random
     * scenarios (greedy and sampled requests, stop tokens that end them while a step is started for them, host-sampled ones,
     * late arrivals, few slots) give every request the same tokens as the engine without it.
     */
    @Test
    void asyncSchedulingGivesEveryRequestTheSameTokensOnTheGpu() {
        EngineCoreTest.load();
        try {
            LoadedModel m = EngineCoreTest.f.model;
            int fed = 0, requests = 0;
            for (long seed = 1; seed <= 10; seed++) {
                var r = new java.util.SplittableRandom(seed);
                AsyncSchedulingPropertyTest.Scenario plain = AsyncSchedulingPropertyTest.scenario(r);
                AsyncSchedulingPropertyTest.Scenario sc = AsyncSchedulingPropertyTest.withStops(plain,
                        AsyncSchedulingPropertyTest.run(cuda(m), false, plain, Map.of()), r);
                var sync = AsyncSchedulingPropertyTest.run(cuda(m), false, sc, Map.of());
                var async = AsyncSchedulingPropertyTest.run(cuda(m), true, sc, Map.of());
                for (int i = 0; i < sc.requests().size(); i++) {
                    assertEquals(null, async.replies().get(i).error, "seed " + seed + " request " + i + " failed");
                    assertEquals(sync.replies().get(i).signature(), async.replies().get(i).signature(), "seed " + seed + " request " + i);
                }
                fed += async.fedSteps();
                requests += sc.requests().size();
            }
            assertTrue(fed > 50, "steps started ahead: " + fed);
            System.out.println("[cuda engine] asynchronous scheduling: " + requests + " requests of 10 random scenarios, the same tokens as without it; "
                    + fed + " steps started ahead with their tokens fed on the GPU");
        } finally {
            EngineCoreTest.close();
        }
    }

    /** Sampled and greedy requests through the engine at 2 ranks: alone = batched under a small budget (chunked prefill beside decode rows). */
    @Test
    void requestsAloneEqualThemBatchedAtTwoRanks() {
        try (Fixture f = new Fixture("llama-gqa")) {
            Map<String, SamplingParams> params = Map.of("a", EngineCoreTest.sampled(42, 24), "b", EngineCoreTest.greedy(20),
                    "c", EngineCoreTest.sampled(7, 30));
            Map<String, int[]> prompts = new LinkedHashMap<>();
            List<String> names = params.keySet().stream().sorted().toList();
            for (int i = 0; i < names.size(); i++) {
                prompts.put(names.get(i), f.prompts.get((i + 1) % f.prompts.size()));
            }
            Map<String, EngineCoreTest.Collect> solo = new LinkedHashMap<>();
            for (String k : names) {
                try (CudaForwardPass gpu = TensorParallelCudaTest.open(f.model.config(), f.model.weights(), 2)) {
                    solo.put(k, EngineCoreTest.run(gpu, 512, Map.of(k, prompts.get(k)), params).get(k));
                }
            }
            try (CudaForwardPass gpu = TensorParallelCudaTest.open(f.model.config(), f.model.weights(), 2)) {
                Map<String, EngineCoreTest.Collect> together = EngineCoreTest.run(gpu, 24, prompts, params);
                for (String k : names) {
                    assertEquals(solo.get(k).signature(), together.get(k).signature(), k + " alone vs batched at 2 ranks");
                }
            }
            System.out.println("[tensor parallel cuda] three requests (two sampled, one greedy) alone = batched at 2 ranks");
        }
    }

    private static List<Integer> tokens(EngineCoreTest.Collect c) {
        return c.events.stream().map(e -> e.token()).toList();
    }

    /** Runs each request alone, then all together under a 24-token budget; returns the solo runs. */
    private static Map<String, EngineCoreTest.Collect> aloneEqualsBatched(Fixture f, Map<String, SamplingParams> params) {
        List<String> names = params.keySet().stream().sorted().toList();
        Map<String, int[]> prompts = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) {
            prompts.put(names.get(i), f.prompts.get((i + 1) % f.prompts.size()));
        }
        Map<String, EngineCoreTest.Collect> solo = new LinkedHashMap<>();
        for (String k : names) {
            try (CudaForwardPass gpu = cuda(f.model)) {
                solo.put(k, EngineCoreTest.run(gpu, 512, Map.of(k, prompts.get(k)), params).get(k));
            }
        }
        try (CudaForwardPass gpu = cuda(f.model)) {
            Map<String, EngineCoreTest.Collect> together = EngineCoreTest.run(gpu, 24, prompts, params);
            for (String k : names) {
                assertEquals(solo.get(k).signature(), together.get(k).signature(), k + " alone vs batched");
            }
        }
        return solo;
    }

    @Test
    void chatModelGreedyRepliesMatchHf() throws IOException {
        Path model = Path.of("models/spindle-chat-target");
        JsonNode ref = new ObjectMapper().readTree(Path.of("src/test/resources/fixtures/chat-target/reference.json").toFile());
        try (LoadedModel m = ModelLoader.load(model, LoadFormat.SAFETENSORS, LoadListener.NONE); CudaForwardPass gpu = cuda(m)) {
            int equal = 0, total = 0;
            for (JsonNode c : ref.get("cases")) {
                int[] ids = ints(c.get("prompt_ids")), hf = ints(c.get("greedy_sdpa"));
                int[] ours = new GreedyGenerator(gpu, 512).generate(ids, hf.length, Set.of(), t -> { }).tokens();
                ChatModelParityTest.checkGreedy(c, new HfParityTest.Greedy(ours, null, null), "cuda chat parity");
                int agree = 0;
                while (agree < hf.length && hf[agree] == ours[agree]) {
                    agree++;
                }
                equal += agree;
                total += hf.length;
            }
            System.out.printf("[cuda chat parity] %d of %d greedy tokens equal HF bf16 sdpa's%n", equal, total);
            HfParityTest.Parity p = ChatModelParityTest.teacherForced(gpu);
            p.print("spindle-chat-target (cuda)");
            p.assertGate("spindle-chat-target (cuda)");
        }
    }

    static int[] ints(JsonNode a) {
        return ChatModelParityTest.ints(a);
    }
}

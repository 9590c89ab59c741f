package dev.spindle.engine.sched;

import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.backend.cuda.CudaPasses;
import dev.spindle.backend.cuda.RequiresGpu;
import dev.spindle.backend.cuda.TensorParallelCudaTest;
import dev.spindle.engine.Engine;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.speculative.DraftModelProposer;
import dev.spindle.engine.speculative.NgramProposer;
import dev.spindle.engine.speculative.Proposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.sample.SamplingParams;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Speculative decoding on the GPU, the bundled target drafting with the bundled drafter (both on
 * CUDA) and with prompt lookup: greedy replies are bit-identical to plain greedy decoding's, alone
 * and in batches of 7 and 64, with every row's token drawn on the device (the server's path for
 * plain requests) and with logprobs (the host path); seeded sampling reproduces.
 */
@RequiresGpu
class CudaSpeculativeTest {
    @BeforeAll
    static void load() {
        SpeculativeEngineTest.loadModels();
    }

    @AfterAll
    static void close() {
        SpeculativeEngineTest.close();
    }

    static CudaForwardPass cuda(LoadedModel m) {
        return CudaPasses.open(m.config(), m.weights(), new CudaOptions(16, 1024, 0.1, 1024, true).withKernels(dev.spindle.backend.cuda.RequiresGpu.KERNELS), LoadListener.NONE);
    }

    static Speculation draftModel(int k) {
        CudaForwardPass d = cuda(SpeculativeEngineTest.drafter);
        return new Speculation(new DraftModelProposer(d, SpeculativeEngineTest.target.config().vocabSize(), 1024, d), k, 64);
    }

    @Test
    void draftedGreedyEqualsPlainGreedyOnTheGpu() {
        Function<Integer, SamplingParams> onDevice = i -> new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), 48, Set.of(), false, -1, null, -1);
        Function<Integer, SamplingParams> withLogprobs = SpeculativeEngineTest::greedy;
        try (CudaForwardPass gpu = cuda(SpeculativeEngineTest.target)) {
            for (int batch : new int[]{1, 7, 64}) {
                List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, batch);
                for (var params : List.of(onDevice, withLogprobs)) {
                    String path = params == onDevice ? "device draws" : "host logprobs";
                    SpeculativeEngineTest.Result plain = SpeculativeEngineTest.run(gpu, Speculation.NONE, ps, params);
                    for (String method : List.of("draft", "ngram")) {
                        Speculation spec = method.equals("draft") ? draftModel(4) : new Speculation(new NgramProposer(1, 4, 0), 4, 64);
                        try (Proposer p = spec.proposer()) {
                            SpeculativeEngineTest.Result drafted = SpeculativeEngineTest.run(gpu, spec, ps, params);
                            assertEquals(plain.signatures(), drafted.signatures(), method + ", " + path + ", batch " + batch);
                            assertTrue(drafted.spec().acceptedTokens() > 0);
                            System.out.printf("[cuda speculative] %s, %s, batch %d: drafted = plain bit for bit; %d drafted, acceptance %.3f, "
                                            + "%.2f tokens a window, steps %d vs %d%n", method, path, batch, drafted.spec().draftTokens(),
                                    drafted.spec().acceptanceRate(), drafted.spec().meanAcceptedLength(), drafted.steps(), plain.steps());
                        }
                    }
                }
            }
        }
    }

    /**
     * The server's path: the pass is opened on this thread and driven by the engine's own thread (the
     * device's context is made current there), drafting with a drafter whose pass was opened here too.
     */
    @Test
    void theEngineThreadDrivesTheGpuAndDrafts() throws Exception {
        try (CudaForwardPass gpu = cuda(SpeculativeEngineTest.target)) {
            List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, 7);
            Function<Integer, SamplingParams> greedy = i -> SamplingParams.greedy(40);
            List<String> plain = SpeculativeEngineTest.run(gpu, Speculation.NONE, ps, greedy).signatures();
            Speculation spec = draftModel(4);
            Engine engine = new Engine(gpu, 512, 64, Set.of(SpeculativeEngineTest.imEnd), 64, spec);
            try {
                List<java.util.concurrent.CompletableFuture<String>> replies = new java.util.ArrayList<>();
                for (int[] p : ps) {
                    java.util.concurrent.CompletableFuture<String> done = new java.util.concurrent.CompletableFuture<>();
                    EngineCoreTest.Collect c = new EngineCoreTest.Collect() {
                        @Override
                        public void onToken(TokenEvent e) {
                            super.onToken(e);
                            if (e.finishReason() != null) {
                                done.complete(signature());
                            }
                        }

                        @Override
                        public void onError(Throwable t) {
                            done.completeExceptionally(t);
                        }
                    };
                    engine.submit(p, greedy.apply(0), c);
                    replies.add(done);
                }
                for (int i = 0; i < ps.size(); i++) {
                    assertEquals(plain.get(i), replies.get(i).get(120, java.util.concurrent.TimeUnit.SECONDS), "request " + i);
                }
            } finally {
                engine.close(); // joins the engine thread, then closes the proposer (and the drafter's pass)
            }
        }
    }

    @Test
    void seededSampledDraftingReproducesOnTheGpu() {
        Function<Integer, SamplingParams> sampled = i -> new SamplingParams(0.6, 20, 0.95, 0, 77L + i, 0, 0, 1, Map.of(), 40, Set.of(), false, -1,
                null, -1);
        try (CudaForwardPass gpu = cuda(SpeculativeEngineTest.target)) {
            List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, 7);
            List<String> a, b;
            Speculation s1 = draftModel(4);
            try (Proposer p = s1.proposer()) {
                a = SpeculativeEngineTest.run(gpu, s1, ps, sampled).signatures();
            }
            Speculation s2 = draftModel(4);
            try (Proposer p = s2.proposer()) {
                b = SpeculativeEngineTest.run(gpu, s2, ps, sampled).signatures();
            }
            assertEquals(a, b);
        }
    }

    /**
     * Sampled at the model's temperatures, drafted by the (greedy) draft model and by prompt lookup: every window's rows are
     * drawn on the device with the uniforms plain decoding gives those positions, so a seeded request gives plain
     * sampling's very tokens on the GPU, alone and in a batch of 7.
     */
    @Test
    void sampledDraftingEqualsPlainSamplingOnTheGpu() {
        try (CudaForwardPass gpu = cuda(SpeculativeEngineTest.target)) {
            assertSampledDraftingEqualsPlain(gpu, 20, 6000L, Map.of("draft", () -> draftModel(4),
                    "ngram", () -> new Speculation(new NgramProposer(1, 4, 0), 4, 64)));
        }
    }

    /**
     * Drafted = plain at 2 tensor-parallel ranks (on lanes of one GPU; the drafter on rank 0's): greedy replies drawn on the
     * device, alone and in a batch of 7, and seeded sampled ones, drafted by the draft model and by prompt lookup.
     */
    @Test
    void draftedEqualsPlainAtTwoTensorParallelRanks() {
        Function<Integer, SamplingParams> onDevice = i -> new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), 48, Set.of(), false, -1, null, -1);
        try (CudaForwardPass gpu = TensorParallelCudaTest.open(SpeculativeEngineTest.target.config(),
                SpeculativeEngineTest.target.weights(), 2)) {
            assertEquals(2, gpu.tensorParallelSize());
            for (int batch : new int[]{1, 7}) {
                List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, batch);
                SpeculativeEngineTest.Result plain = SpeculativeEngineTest.run(gpu, Speculation.NONE, ps, onDevice);
                for (String method : List.of("draft", "ngram")) {
                    Speculation spec = method.equals("draft") ? draftModel(4) : new Speculation(new NgramProposer(1, 4, 0), 4, 64);
                    try (Proposer p = spec.proposer()) {
                        SpeculativeEngineTest.Result drafted = SpeculativeEngineTest.run(gpu, spec, ps, onDevice);
                        assertEquals(plain.signatures(), drafted.signatures(), method + " at 2 ranks, batch " + batch);
                        assertTrue(drafted.spec().acceptedTokens() > 0);
                        System.out.printf("[cuda speculative, 2 ranks] %s, batch %d: drafted = plain bit for bit; acceptance %.3f, steps %d vs %d%n",
                                method, batch, drafted.spec().acceptanceRate(), drafted.steps(), plain.steps());
                    }
                }
            }
            assertSampledDraftingEqualsPlain(gpu, 20, 7000L, Map.of("draft", () -> draftModel(4),
                    "ngram", () -> new Speculation(new NgramProposer(1, 4, 0), 4, 64)));
        }
    }

    /**
     * Seeded requests sampled at T 0.6 and 1.0 (top-k topK, top-p 0.95; seeds from seed0), batches 1 and 7: drafted by each
     * proposer (made afresh for every run) they give plain sampling's tokens, bit for bit, and some drafts are accepted.
     */
    static void assertSampledDraftingEqualsPlain(CudaForwardPass gpu, int topK, long seed0, Map<String, java.util.function.Supplier<Speculation>> proposers) {
        for (double t : new double[]{0.6, 1.0}) {
            Function<Integer, SamplingParams> sampled = i -> new SamplingParams(t, topK, 0.95, 0, seed0 + i, 0, 0, 1, Map.of(), 48, Set.of(), false,
                    -1, null, -1);
            for (int batch : new int[]{1, 7}) {
                List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, batch);
                SpeculativeEngineTest.Result plain = SpeculativeEngineTest.run(gpu, Speculation.NONE, ps, sampled);
                for (var method : new java.util.TreeMap<>(proposers).entrySet()) {
                    Speculation spec = method.getValue().get();
                    try (Proposer p = spec.proposer()) {
                        SpeculativeEngineTest.Result drafted = SpeculativeEngineTest.run(gpu, spec, ps, sampled);
                        String what = method.getKey() + " at T " + t + " top-k " + topK + " top-p 0.95, batch " + batch;
                        assertEquals(plain.signatures(), drafted.signatures(), what);
                        assertTrue(drafted.spec().acceptedTokens() > 0, what + ": some drafts accepted");
                        System.out.printf("[cuda sampled drafting] %s: drafted = plain bit for bit; %d drafted, acceptance %.3f, steps %d vs %d%n", what,
                                drafted.spec().draftTokens(), drafted.spec().acceptanceRate(), drafted.steps(), plain.steps());
                    }
                }
            }
        }
    }
}

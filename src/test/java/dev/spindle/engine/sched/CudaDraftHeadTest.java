package dev.spindle.engine.sched;

import dev.spindle.backend.cpu.DFlashHeadParityTest;
import dev.spindle.backend.cuda.CudaDraftHead;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.RequiresGpu;
import dev.spindle.engine.speculative.DFlashProposer;
import dev.spindle.engine.speculative.NgramProposer;
import dev.spindle.engine.speculative.Proposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.model.Bf16;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadListener;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.DraftHead;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * DFlash and DFlash2 heads on the GPU beside a CUDA target: the parity gate of the CPU heads (as close to the
 * fp32 PyTorch reference as its bf16 run, decisive draft tokens equal), and in the engine drafted greedy =
 * plain greedy bit for bit with the trained heads (device draws and host logprobs, batches 1 and 7), seeded
 * sampled drafting reproducible.
 */
@RequiresGpu
class CudaDraftHeadTest {
    @BeforeAll
    static void load() {
        SpeculativeEngineTest.loadTarget();
    }

    @AfterAll
    static void close() {
        SpeculativeEngineTest.close();
    }

    static Speculation head(CudaForwardPass gpu, Path dir, Arena arena) {
        return head(gpu, dir, arena, false);
    }

    /** @param sampled at temperature &gt; 0, drafts drawn from the head's distribution (DFlash2: the device walk) and verified on the host */
    static Speculation head(CudaForwardPass gpu, Path dir, Arena arena, boolean sampled) {
        DraftHeadConfig hc = DraftHeadConfig.read(dir);
        var weights = DraftHeadLoader.load(dir, hc, arena, LoadListener.NONE);
        return new Speculation(new DFlashProposer(new CudaDraftHead(hc, weights, gpu, hc.tapLayers(1)), sampled), 7, 64);
    }

    @Test
    void cudaHeadsMatchThePyTorchReference() throws Exception {
        try (CudaForwardPass gpu = CudaSpeculativeTest.cuda(SpeculativeEngineTest.target)) {
            for (String name : List.of("dflash-random", "dflash2-random")) {
                DFlashHeadParityTest.verify(name, "CUDA", gpu, (hc, weights) -> new CudaDraftHead(hc, weights, gpu, hc.tapLayers(1)));
            }
        }
    }

    /**
     * One forward over several sequences' blocks gives each what it gets alone, bit for bit: contexts of different
     * lengths (and none), blocks of different sizes, greedy and seeded sampled rows; then the batched injection of
     * several sequences' rows equals injecting them one by one (the next drafts agree).
     */
    @Test
    void batchedDraftsAndInjectionsEqualOneByOne() {
        try (CudaForwardPass gpu = CudaSpeculativeTest.cuda(SpeculativeEngineTest.target); Arena arena = Arena.ofShared()) {
            for (String dir : List.of("models/spindle-chat-dflash", "models/spindle-chat-dflash2")) {
                DraftHeadConfig hc = DraftHeadConfig.read(Path.of(dir));
                var weights = DraftHeadLoader.load(Path.of(dir), hc, arena, LoadListener.NONE);
                int[] taps = hc.tapLayers(1);
                int width = taps.length * gpu.config().hiddenSize();
                java.util.Random rnd = new java.util.Random(5);
                java.util.function.IntFunction<float[][]> rows = count -> {
                    float[][] r = new float[count][width];
                    for (float[] row : r) {
                        for (int i = 0; i < width; i++) {
                            row[i] = Bf16.round((float) rnd.nextGaussian());
                        }
                    }
                    return r;
                };
                int[] lengths = {5, 17, 40};
                List<float[][]> ctx = new java.util.ArrayList<>();
                for (int len : lengths) {
                    ctx.add(rows.apply(len));
                }
                SamplingParams t06 = new SamplingParams(0.6, 20, 0.95, 0, 77L, 0, 0, 1, Map.of(), 40, Set.of(), false, 1, null, -1);
                java.util.function.Supplier<List<DraftHead.Call>> calls = () -> List.of(
                        new DraftHead.Call(1, 11, 7, null), new DraftHead.Call(2, 12, 3, null),
                        new DraftHead.Call(3, 13, 7, new DraftHead.Sampling(t06, new java.util.SplittableRandom(9))),
                        new DraftHead.Call(4, 14, 5, null));
                try (CudaDraftHead batched = new CudaDraftHead(hc, weights, gpu, taps); CudaDraftHead single = new CudaDraftHead(hc, weights, gpu, taps)) {
                    for (int i = 0; i < lengths.length; i++) {
                        single.inject(i + 1, 0, ctx.get(i), lengths[i]);
                    }
                    List<Observation> all = new java.util.ArrayList<>();
                    for (int i = 0; i < lengths.length; i++) {
                        all.add(new Observation(i + 1, 0, ctx.get(i), lengths[i]));
                    }
                    batched.injectAll(all);
                    for (int round = 0; round < 2; round++) {
                        List<Proposal> together = batched.draftAll(calls.get());
                        float[][] lastTogether = batched.lastLogits();
                        float[][] lastAlone = null;
                        List<DraftHead.Call> cs = calls.get();
                        for (int i = 0; i < cs.size(); i++) {
                            DraftHead.Call c = cs.get(i);
                            var alone = single.draft(c.id(), c.anchor(), c.drafts(), c.sampling());
                            org.junit.jupiter.api.Assertions.assertArrayEquals(alone.tokens(), together.get(i).tokens(), dir + " round " + round + " sequence " + c.id());
                            if (alone.q() != null) {
                                for (int r = 0; r < alone.q().length; r++) {
                                    org.junit.jupiter.api.Assertions.assertArrayEquals(alone.q()[r], together.get(i).q()[r], dir + ": q of sequence " + c.id());
                                }
                            }
                            lastAlone = single.lastLogits();
                        }
                        for (int r = 0; r < lastAlone.length; r++) {
                            org.junit.jupiter.api.Assertions.assertArrayEquals(lastAlone[r], lastTogether[r], dir + ": logits of the last block, row " + r);
                        }
                        // the next step's rows: two sequences together, the same rows one by one
                        float[][] more1 = rows.apply(3), more2 = rows.apply(2);
                        batched.injectAll(List.of(new Observation(1, lengths[0] + 3 * round, more1, 3),
                                new Observation(3, lengths[2] + 2 * round, more2, 2)));
                        single.inject(1, lengths[0] + 3 * round, more1, 3);
                        single.inject(3, lengths[2] + 2 * round, more2, 2);
                    }
                    System.out.printf("[cuda dflash] %s: 4 sequences drafted in one forward = one by one, bit for bit; batched injection too%n",
                            Path.of(dir).getFileName());
                }
            }
        }
    }

    @Test
    void draftedEqualsPlainWithTheTrainedHeads() {
        Function<Integer, SamplingParams> onDevice = i -> SamplingParams.greedy(48);
        Function<Integer, SamplingParams> withLogprobs = SpeculativeEngineTest::greedy;
        try (CudaForwardPass gpu = CudaSpeculativeTest.cuda(SpeculativeEngineTest.target); Arena arena = Arena.ofShared()) {
            for (String dir : List.of("models/spindle-chat-dflash", "models/spindle-chat-dflash2")) {
                for (int batch : new int[]{1, 7}) {
                    List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, batch);
                    for (var params : List.of(onDevice, withLogprobs)) {
                        SpeculativeEngineTest.Result plain = SpeculativeEngineTest.run(gpu, Speculation.NONE, ps, params);
                        Speculation spec = head(gpu, Path.of(dir), arena);
                        try (Proposer p = spec.proposer()) {
                            long t0 = System.nanoTime();
                            SpeculativeEngineTest.Result drafted = SpeculativeEngineTest.run(gpu, spec, ps, params);
                            double ms = (System.nanoTime() - t0) / 1e6;
                            assertEquals(plain.signatures(), drafted.signatures(), dir + " batch " + batch);
                            assertTrue(drafted.spec().acceptanceRate() > 0.5, dir + ": " + drafted.spec().acceptanceRate());
                            System.out.printf("[cuda dflash] %s, %s, batch %d: drafted = plain bit for bit; %d drafted, acceptance %.3f, %.2f tokens a window, "
                                            + "steps %d vs %d; proposer %.2f ms a drafted step; %.0f ms in all%n", Path.of(dir).getFileName(),
                                    params == onDevice ? "device draws" : "host logprobs", batch, drafted.spec().draftTokens(), drafted.spec().acceptanceRate(),
                                    drafted.spec().meanAcceptedLength(), drafted.steps(), plain.steps(),
                                    drafted.spec().proposerNanos() / 1e6 / Math.max(1, drafted.spec().drafts()), ms);
                        }
                    }
                }
            }
            // seeded sampled drafting reproduces on the GPU
            Function<Integer, SamplingParams> sampled = i -> new SamplingParams(0.6, 20, 0.95, 0, 3000L + i, 0, 0, 1, Map.of(), 40, Set.of(), false,
                    1, null, -1);
            List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, 7);
            for (String dir : List.of("models/spindle-chat-dflash", "models/spindle-chat-dflash2")) {
                List<String> first, second;
                Speculation s1 = head(gpu, Path.of(dir), arena, true);
                try (Proposer p = s1.proposer()) {
                    first = SpeculativeEngineTest.run(gpu, s1, ps, sampled).signatures();
                }
                Speculation s2 = head(gpu, Path.of(dir), arena, true);
                try (Proposer p = s2.proposer()) {
                    second = SpeculativeEngineTest.run(gpu, s2, ps, sampled).signatures();
                }
                assertEquals(first, second, dir + ": seeded sampled drafting reproduces on the GPU");
            }
        }
    }

    /**
     * Sampled at the model's temperatures with deterministic drafts (the trained DFlash head's argmax, prompt lookup): every
     * window's rows are drawn on the device with the uniforms plain decoding gives those positions, so a seeded request
     * gives plain sampling's very tokens on the GPU, alone and in a batch of 7.
     */
    @Test
    void sampledDraftingWithDeterministicDraftsEqualsPlainSamplingOnTheGpu() {
        try (CudaForwardPass gpu = CudaSpeculativeTest.cuda(SpeculativeEngineTest.target); Arena arena = Arena.ofShared()) {
            CudaSpeculativeTest.assertSampledDraftingEqualsPlain(gpu, 0, 5000L, Map.of(
                    "dflash", () -> head(gpu, Path.of("models/spindle-chat-dflash"), arena),
                    "ngram", () -> new Speculation(new NgramProposer(1, 4, 0), 4, 64)));
        }
    }
}

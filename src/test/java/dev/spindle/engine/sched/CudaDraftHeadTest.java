package dev.spindle.engine.sched;

import dev.spindle.backend.cpu.DFlashHeadParityTest;
import dev.spindle.backend.cuda.CudaDraftHead;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.engine.SamplingParams;
import dev.spindle.engine.spec.DFlashProposer;
import dev.spindle.engine.spec.Proposer;
import dev.spindle.engine.spec.Speculation;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadListener;
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
@dev.spindle.backend.cuda.RequiresGpu
class CudaDraftHeadTest {
    @BeforeAll
    static void load() {
        SpeculativeEngineTest.loadModels();
    }

    @AfterAll
    static void close() {
        SpeculativeEngineTest.close();
    }

    static Speculation head(CudaForwardPass gpu, Path dir, Arena arena) {
        DraftHeadConfig hc = DraftHeadConfig.read(dir);
        var weights = DraftHeadLoader.load(dir, hc, arena, LoadListener.NONE);
        return new Speculation(new DFlashProposer(new CudaDraftHead(hc, weights, gpu, hc.tapLayers(1))), 7, 64);
    }

    @Test
    void cudaHeadsMatchThePyTorchReference() throws Exception {
        try (CudaForwardPass gpu = CudaSpeculativeTest.cuda(SpeculativeEngineTest.target)) {
            for (String name : List.of("dflash-random", "dflash2-random")) {
                DFlashHeadParityTest.verify(name, "CUDA", gpu, (hc, weights) -> new CudaDraftHead(hc, weights, gpu, hc.tapLayers(1)));
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
                Speculation s1 = head(gpu, Path.of(dir), arena);
                try (Proposer p = s1.proposer()) {
                    first = SpeculativeEngineTest.run(gpu, s1, ps, sampled).signatures();
                }
                Speculation s2 = head(gpu, Path.of(dir), arena);
                try (Proposer p = s2.proposer()) {
                    second = SpeculativeEngineTest.run(gpu, s2, ps, sampled).signatures();
                }
                assertEquals(first, second, dir + ": seeded sampled drafting reproduces on the GPU");
            }
        }
    }
}

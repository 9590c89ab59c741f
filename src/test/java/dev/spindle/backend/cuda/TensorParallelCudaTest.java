package dev.spindle.backend.cuda;

import dev.spindle.Fixture;
import dev.spindle.backend.cpu.HfParityTest;
import dev.spindle.backend.cpu.Stats;
import dev.spindle.backend.cpu.TensorParallelCpuTest;
import dev.spindle.engine.ChatModelParityTest;
import dev.spindle.model.DummyWeights;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.ModelWeights;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The tensor-parallel CUDA pass ({@link TensorParallelGroup}) with its ranks on lanes of one GPU (each rank its own
 * stream, weights, KV pool and cuBLASLt; the all-reduce reads the other ranks' partials as it would over peer access):
 * the whole multi-rank path runs here, only the bytes stay on one device. Two ranks pass the HF fidelity gate on every
 * fixture and on the trained chat model; decode steps (replayed as one captured graph that every rank's stream joins)
 * equal the window (launched kernel by kernel) bit for bit, and two runs agree; four
 * ranks stay within the sums' rounding of one.
 */
@RequiresGpu
public class TensorParallelCudaTest {
    static List<String> fixtures() {
        return Fixture.NAMES;
    }

    public static CudaForwardPass open(ModelConfig c, ModelWeights w, int ranks) {
        return CudaPasses.openTensorParallel(c, w, CudaForwardPassTest.OPTIONS, LoadListener.NONE, Placement.lanesOfGpu0(ranks));
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void twoRanksPassTheGateAndDecodeStepsEqualTheWindow(String name) {
        try (Fixture f = new Fixture(name); CudaForwardPass one = CudaForwardPassTest.open(f); CudaForwardPass two = open(f.model.config(), f.model.weights(), 2)) {
            assertEquals(2, two.tensorParallelSize());
            assertEquals(2, two.tensorParallelMemory().size(), two.tensorParallelMemory().toString());
            HfParityTest.Parity p = HfParityTest.Parity.teacherForced(f, two, false);
            HfParityTest.Parity rows = HfParityTest.Parity.teacherForced(f, two, true);
            p.print(name + " (cuda, 2 tensor-parallel ranks)");
            p.assertGate(name + " (cuda, 2 ranks)");
            assertEquals(p, rows, name + ": at 2 ranks, decode steps give other logits than the window");
            double kl = 0;
            int positions = 0, differ = 0;
            for (int[] prompt : f.prompts) {
                float[][] a = HfParityTest.Parity.logits(one, prompt, false), b = HfParityTest.Parity.logits(two, prompt, false);
                float[][] again = HfParityTest.Parity.logits(two, prompt, false);
                for (int i = 0; i < a.length; i++, positions++) {
                    kl += Stats.kl(a[i], b[i]);
                    differ += java.util.Arrays.equals(a[i], b[i]) ? 0 : 1;
                    assertArrayEquals(b[i], again[i], name + ": two runs at 2 ranks differ at position " + i);
                }
            }
            System.out.printf("[tensor parallel cuda] %s: 2 ranks against 1, KL(TP-1 || TP-2) = %.3e nats, %d of %d positions' logits differ%n",
                    name, kl / positions, differ, positions);
            System.out.println("[tensor parallel cuda] " + String.join("; ", two.tensorParallelMemory()));
        }
    }

    @Test
    void theTrainedChatModelAtTwoRanksPassesTheGate() throws java.io.IOException {
        try (LoadedModel m = ModelLoader.load(Path.of("models/spindle-chat-target"),
                LoadFormat.SAFETENSORS, LoadListener.NONE);
             CudaForwardPass two = open(m.config(), m.weights(), 2)) {
            HfParityTest.Parity p = ChatModelParityTest.teacherForced(two);
            p.print("spindle-chat-target (cuda, 2 tensor-parallel ranks)");
            p.assertGate("spindle-chat-target (cuda, 2 ranks)");
        }
    }

    /** Four ranks of a random 16/8-head llama: within the sums' rounding of one rank (as on the CPU), decode steps = the window. */
    @Test
    void fourRanksStayWithinTheSumsRoundingOfOne() throws Exception {
        ModelConfig c = TensorParallelCpuTest.sixteenEightHeadLlama();
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            ModelWeights w = DummyWeights.create(c, 41, arena, LoadListener.NONE);
            try (CudaForwardPass one = CudaPasses.open(c, w, CudaForwardPassTest.OPTIONS, LoadListener.NONE); CudaForwardPass four = open(c, w, 4)) {
                assertEquals(4, four.tensorParallelSize());
                TensorParallelCpuTest.assertWithinTheSumsRoundingOfOne("cuda", one, four, 4);
            }
        }
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.Fixture;
import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.ModelConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Tensor parallelism's numerics on the CPU ({@link TensorParallelLayout}; the reference a multi-GPU path must
 * reproduce): the pass computed as 2 ranks would compute it (each rank its heads, its KV store, its MLP
 * columns; o_proj and down_proj partials summed in rank order) passes the same HF fidelity gate as one rank
 * on every fixture, differs from one rank only by that sum's rounding, and keeps decode steps = the window.
 */
class TensorParallelCpuTest {
    static List<String> fixtures() {
        return Fixture.NAMES;
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void twoRanksPassTheFidelityGateAndDecodeStepsEqualTheWindow(String name) {
        try (Fixture f = new Fixture(name);
             CpuForwardPass one = f.cpu();
             CpuForwardPass two = new CpuForwardPass(f.model.config(), f.model.weights(), 64, 16, Runtime.getRuntime().availableProcessors(),
                     KvSlots.PER_EXECUTED_LAYER, 2)) {
            HfParityTest.Parity p = HfParityTest.Parity.teacherForced(f, two, false);
            p.print(name + " (cpu, 2 tensor-parallel ranks)");
            p.assertGate(name + " at 2 ranks");
            HfParityTest.Parity rows = HfParityTest.Parity.teacherForced(f, two, true);
            assertEquals(p, rows, name + ": at 2 ranks, decode steps give other logits than the window");
            double kl = 0;
            int positions = 0, differ = 0;
            for (int[] prompt : f.prompts) {
                float[][] a = HfParityTest.Parity.logits(one, prompt, false), b = HfParityTest.Parity.logits(two, prompt, false);
                for (int i = 0; i < a.length; i++, positions++) {
                    kl += Stats.kl(a[i], b[i]);
                    differ += java.util.Arrays.equals(a[i], b[i]) ? 0 : 1;
                }
            }
            System.out.printf("[tensor parallel] %s: 2 ranks against 1, KL(TP-1 || TP-2) = %.3e nats, %d of %d positions' logits differ%n",
                    name, kl / positions, differ, positions);
        }
    }

    @Test
    void theTrainedChatModelAtTwoRanksPassesTheGate() throws java.io.IOException {
        Path model = Path.of("models/spindle-chat-target");
        try (dev.spindle.model.LoadedModel m = dev.spindle.model.ModelLoader.load(model, dev.spindle.model.LoadFormat.SAFETENSORS,
                dev.spindle.model.LoadListener.NONE);
             CpuForwardPass two = new CpuForwardPass(m.config(), m.weights(), 64, 16, Runtime.getRuntime().availableProcessors(),
                     KvSlots.PER_EXECUTED_LAYER, 2)) {
            HfParityTest.Parity p = dev.spindle.engine.ChatModelParityTest.teacherForced(two);
            p.print("spindle-chat-target (cpu, 2 tensor-parallel ranks)");
            p.assertGate("spindle-chat-target at 2 ranks");
        }
    }

    @Test
    void theLayoutSplitsHeadsAndColumnsOrSaysWhatDoesNotDivide() {
        ModelConfig c = ConfigParser.read(Path.of("models/shapes/nanbeige4.3-33b-shape/config.json"));
        TensorParallelLayout four = TensorParallelLayout.of(c, 4);
        assertEquals(14, four.qHeads());
        assertEquals(2, four.kvHeads());
        assertEquals(22016 / 4, four.intermediate());
        assertEquals(3 * 14 * 128, four.qStart(3));
        assertEquals(3 * 2 * 128, four.kvStart(3));
        List<String> errors = new ArrayList<>();
        for (int ranks : new int[]{0, 3, 16}) {
            errors.add(assertThrows(IllegalArgumentException.class, () -> TensorParallelLayout.of(c, ranks)).getMessage());
        }
        assertTrue(errors.get(0).contains("at least 1"), errors.get(0));
        assertTrue(errors.get(1).contains("does not divide the model's 8 KV heads") && errors.get(1).contains("1, 2, 4, 8"), errors.get(1));
        assertTrue(errors.get(2).contains("16"), errors.get(2));
    }
}

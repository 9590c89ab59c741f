package dev.spindle.engine.sched;

import dev.spindle.backend.ForwardingPass;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.sample.Sampler;
import dev.spindle.sample.SamplerTest;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The engine's side of drawing tokens on the device (the GPU's sample kernel has its own contract
 * test): which rows it hands to the backend, and that it takes each draw's uniform from the
 * sequence's generator exactly as the host sampler would. A backend that "draws on the device" with
 * the host rule must then give every request the tokens of the host path.
 */
public class DeviceDrawWiringTest {
    @org.junit.jupiter.api.BeforeAll
    static void load() {
        EngineCoreTest.load();
    }

    @org.junit.jupiter.api.AfterAll
    static void close() {
        EngineCoreTest.close();
    }

    /** The CPU pass, drawing the rows it is handed by the host rule with the uniform it is given. */
    static final class HostRuleDrawing extends ForwardingPass {
        int drawn;

        HostRuleDrawing(CpuForwardPass inner) {
            super(inner);
        }

        @Override
        public boolean drawsOnDevice() {
            return true;
        }

        @Override
        public StepOutput execute(ModelStep step) {
            List<ModelStep.Window> plain = new java.util.ArrayList<>();
            for (ModelStep.Window w : step.windows()) {
                plain.add(new ModelStep.Window(w.tokens(), w.start(), w.table(), w.logitRows(), null, w.tap()));
            }
            StepOutput inside = inner.execute(new ModelStep(plain, step.tapLayers()));
            List<float[][]> logits = new java.util.ArrayList<>(inside.logits());
            List<int[]> tokens = new java.util.ArrayList<>(inside.tokens());
            int vocab = config().vocabSize();
            for (int i = 0; i < step.windows().size(); i++) {
                ModelStep.Draw d = step.windows().get(i).draw();
                if (d == null) {
                    continue;
                }
                float[][] rows = logits.get(i);
                int[] ids = new int[rows.length];
                SamplingParams p = new SamplingParams(d.temperature(), d.topK(), d.topP(), d.minP(), null, 0, 0, 1, Map.of(), 1, Set.of(), true,
                        -1, null, -1);
                for (int r = 0; r < rows.length; r++) {
                    ids[r] = Sampler.sample(rows[r], p, new int[vocab], new int[vocab], SamplerTest.fixed(d.u()[r])).token();
                    drawn++;
                }
                tokens.set(i, ids);
                logits.set(i, new float[0][]);
            }
            return new StepOutput(logits, tokens, inside.taps());
        }
    }

    public static SamplingParams plain(double temperature, Long seed, int max) {
        return new SamplingParams(temperature, 40, 0.9, 0.05, seed, 0, 0, 1, Map.of(), max, Set.of(), true, -1, null, -1);
    }

    @Test
    void plainRequestsAreDrawnOnTheDeviceWithTheHostPathsTokens() {
        int[] a = EngineCoreTest.f.prompts.get(1), b = EngineCoreTest.f.prompts.get(2), c = EngineCoreTest.f.prompts.get(0);
        Map<String, SamplingParams> params = Map.of("a", plain(0.9, 42L, 24), "b", plain(0, null, 20), "c", plain(1.3, 7L, 30));
        Map<String, int[]> prompts = new LinkedHashMap<>(Map.of("a", a, "b", b, "c", c));
        Map<String, EngineCoreTest.Collect> host;
        try (CpuForwardPass cpu = EngineCoreTest.cpu(64)) {
            host = EngineCoreTest.run(cpu, 24, prompts, params);
        }
        try (HostRuleDrawing device = new HostRuleDrawing(EngineCoreTest.cpu(64))) {
            Map<String, EngineCoreTest.Collect> drawn = EngineCoreTest.run(device, 24, prompts, params);
            int tokens = 0;
            for (String k : List.of("a", "b", "c")) {
                assertEquals(host.get(k).signature(), drawn.get(k).signature(), k + ": device draws vs host sampling");
                tokens += drawn.get(k).events.size();
            }
            assertEquals(tokens, device.drawn, "every token drawn on the device");
        }
    }

    @Test
    void penaltiesBiasAndLogprobsStayOnTheHost() {
        int[] a = EngineCoreTest.f.prompts.get(1);
        List<SamplingParams> hostOnly = List.of(
                EngineCoreTest.sampled(3, 8), // penalties, bias, logprobs
                new SamplingParams(0.9, 0, 1, 0, 5L, 0, 0, 1, Map.of(), 8, Set.of(), true, 0, null, -1), // logprobs
                new SamplingParams(0.9, 0, 1, 0, 5L, 0.5, 0, 1, Map.of(), 8, Set.of(), true, -1, null, -1), // presence penalty
                new SamplingParams(0.9, 0, 1, 0, 5L, 0, 0, 1, Map.of(3, 2.0), 8, Set.of(), true, -1, null, -1)); // bias
        for (SamplingParams p : hostOnly) {
            try (HostRuleDrawing device = new HostRuleDrawing(EngineCoreTest.cpu(64))) {
                EngineCoreTest.Collect got = EngineCoreTest.run(device, 512, Map.of("a", a), Map.of("a", p)).get("a");
                assertEquals(8, got.events.size());
                assertEquals(0, device.drawn, "sampled on the host: " + p);
            }
        }
    }
}

package dev.spindle.cli;

import dev.spindle.Fixture;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The bench's engine_decode figure counts what it times: every request's tokens after its first, on the CPU pass. */
class EngineDecodeFigureTest {
    @Test
    void countsTheDecodedTokensOfEveryRequest() {
        try (Fixture f = new Fixture("llama-gqa");
             CpuForwardPass cpu = new CpuForwardPass(f.model.config(), f.model.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            for (boolean async : new boolean[]{false, true}) {
                Map<String, Object> m = EngineDecodeFigure.measure(cpu, 64, 3, 20, 9, async, 5);
                assertEquals(3 * 8L, m.get("decode_tokens"), "three requests, 8 tokens each after the first");
                assertEquals(async, m.get("async_scheduling"));
                assertTrue((double) m.get("tokens_per_second") > 0);
            }
        }
    }
}

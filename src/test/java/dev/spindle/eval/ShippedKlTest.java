package dev.spindle.eval;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.Test;

import java.io.InputStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code spindle kl} on the bundled model over the shipped corpus, in CI: the KL that the start log and /v1/models disclose
 * for fp8 weights (kl/measured.json) is what a fresh run measures (within 3%: another CPU's vector width changes the
 * sums' order, not the figure).
 */
class ShippedKlTest {
    @Test
    void theDisclosedFp8KlIsWhatAFreshRunMeasures() throws Exception {
        Path dir = Path.of("models/spindle-chat-target");
        List<KlCorpus.Entry> corpus;
        try (Tokenizer tok = Tokenizer.load(dir); InputStream in = KlCorpus.class.getResourceAsStream(KlCorpus.SHIPPED)) {
            corpus = KlCorpus.read(in, KlCorpus.SHIPPED, ChatTemplate.fromModelDir(dir), tok);
        }
        assertEquals(List.of("chat", "agentic", "code", "chinese"), corpus.stream().map(KlCorpus.Entry::category).distinct().toList());
        JsonNode disclosed = KlDisclosure.shipped().find(Quantization.FP8_BLOCK.label, "bf16").orElseThrow();
        int threads = Math.max(1, Runtime.getRuntime().availableProcessors());
        try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, Quantization.FP8_BLOCK);
             CpuForwardPass a = new CpuForwardPass(m.config(), m.weights(), 128, 16, threads, KvSlots.PER_EXECUTED_LAYER);
             CpuForwardPass b = new CpuForwardPass(q.config(), q.weights(), 128, 16, threads, KvSlots.PER_EXECUTED_LAYER)) {
            Map<String, KlRun.Summary> got = new KlRun(a, b, 512).run(corpus, 2048, l -> { });
            for (String c : List.of("chat", "agentic", "code", "chinese", "all")) {
                double want = disclosed.path("kl_mean").path(c).asDouble();
                double measured = got.get(c).meanKl();
                assertTrue(Math.abs(measured - want) <= 0.03 * want, c + ": measured " + measured + ", disclosed " + want);
            }
        }
    }
}

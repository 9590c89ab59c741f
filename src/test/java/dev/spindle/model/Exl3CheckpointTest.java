package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * EXL3 checkpoints of llama-gqa (scripts/make_exl3_fixture.py: exllamav3's storage layout, its three codebooks, mixed bit
 * widths, a 16-bit head, padded dimensions, packed output signs): each binds its trellis-coded layers as {@link Exl3Matrix},
 * decodes every tile to the fp16 values the script's transcription of exllamav3's dequantizer gives (bit for bit), stays
 * within a KL bound of the bf16
 * checkpoint, and keeps the decode-equals-prefill invariant.
 */
class Exl3CheckpointTest {

    @ParameterizedTest
    @CsvSource({"mul1, MUL1, 4, 4, 0.03", "mixed-mcg, MCG, 5, 3, 0.03", "3inst, THREE_INST, 6, 6, 0.003"})
    void anExl3CheckpointDecodesAsExllamav3DefinesAndServesCloseToItsRelease(String fixture, Exl3Codebook codebook, int attnBits,
                                                                          int mlpBits, double klBound) throws Exception {
        Path dir = Exl3Fixtures.model(fixture);
        try (LoadedModel bf16 = ModelLoader.load(MlxCheckpointTest.BF16, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             Arena arena = Arena.ofConfined()) {
            Exl3Matrix[] weights = Exl3Fixtures.referenced(q);
            assertEquals(attnBits, weights[0].bits());
            assertEquals(mlpBits, weights[1].bits());
            assertEquals("exl3 (" + attnBits + " bits a weight, " + codebook.label + " trellis)", weights[0].format());
            SafetensorsFile ref = SafetensorsFile.open(Exl3Fixtures.reference(fixture), arena);
            ValueLayout.OfShort f16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
            for (int w = 0; w < 2; w++) {
                Exl3Matrix m = weights[w];
                assertEquals(codebook, m.codebook());
                var hat = ref.bytes(ref.tensors().get(Exl3Fixtures.NAMES[w] + ".w_hat"));
                int np = Exl3Matrix.pad(m.rows());
                float[] tile = new float[256];
                int[] words = new int[8 * m.bits()];
                for (int kt = 0; kt < m.kPad() / 16; kt++) {
                    for (int nt = 0; nt < np / 16; nt++) {
                        m.tile(kt, nt, tile, words);
                        for (int i = 0; i < 256; i++) {
                            float want = Float.float16ToFloat(hat.getAtIndex(f16, (long) (kt * 16 + i / 16) * np + nt * 16 + i % 16));
                            assertEquals(Float.floatToIntBits(want), Float.floatToIntBits(tile[i]), Exl3Fixtures.NAMES[w] + " tile (" + kt + ", " + nt + ") " + i);
                        }
                    }
                }
            }
            int[] prompt = MlxCheckpointTest.PROMPT;
            float[][] want = MlxCheckpointTest.logits(bf16, prompt), got = MlxCheckpointTest.logits(q, prompt);
            double kl = MlxCheckpointTest.meanKl(want, got);
            System.out.printf("[exl3] llama-gqa %s: KL(bf16 || exl3) %.3g%n", fixture, kl);
            assertTrue(kl > 0 && kl < klBound, fixture + ": KL " + kl);
            try (CpuForwardPass cpu = new CpuForwardPass(q.config(), q.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                TestSteps.assertStepsEqualWindow(cpu, prompt, got, "exl3 " + fixture);
            }
        }
    }

    /** The codebooks as exllamav3's kernels compute them, at states worked out by hand from its formulas. */
    @Test
    void theCodebooksMatchHandComputedStates() {
        // mul1, state 1: x = 0x83DCD12D, bytes 0x83 + 0xDC + 0xD1 + 0x2D = 0x25D = 605; h = 1024 + 605 = 1629;
        // 1629 * fp16(0x1eee) + fp16(0xc931) = 1629 * 1774 / 2^18 - 1329 / 2^7 = 0.640... -> fp16
        double exact = 1629.0 * 1774 / (1 << 18) - 1329.0 / 128;
        assertEquals(Float.floatToFloat16((float) exact), Exl3Codebook.MUL1.decodeHalf(1));
        // 3inst, state 0: x = 64248484 = 0x03D45AA4; low half 0x5AA4 & 0x8fff = 0x0AA4, ^ 0x3b60 = 0x31C4 (0.1802);
        // high half 0x03D4 & 0x8fff = 0x03D4, ^ 0x3b60 = 0x38B4 (0.5879); their sum 0.7681 rounded to fp16
        float lo = Float.float16ToFloat((short) 0x31C4), hi = Float.float16ToFloat((short) 0x38B4);
        assertEquals(Float.floatToFloat16(lo + hi), Exl3Codebook.THREE_INST.decodeHalf(0));
        // every value of every codebook is finite, and the tables are what decodeHalf gives
        for (Exl3Codebook c : Exl3Codebook.values()) {
            float[] t = c.table();
            for (int s = 0; s < 1 << 16; s += 97) {
                assertTrue(Float.isFinite(t[s]));
                assertEquals(Float.float16ToFloat(c.decodeHalf(s)), t[s]);
            }
        }
    }

    /** What the EXL3 reader does not take is refused by field or by tensor name. */
    @Test
    void exl3ConfigsAndLayersItDoesNotReadAreRefusedByName(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        ObjectMapper json = new ObjectMapper();
        for (String[] c : new String[][]{
                {"{\"quantization_config\": {\"quant_method\": \"exl3\", \"bits\": \"four\"}}", "quantization_config.bits"},
                {"{\"quantization_config\": {\"quant_method\": \"exl3\", \"bits\": 4, \"head_bits\": 0}}", "head_bits"},
                {"{\"quantization_config\": {\"quant_method\": \"exl3\", \"bits\": 4, \"codebook\": \"2mad\"}}", "'2mad' is not an EXL3 codebook"}}) {
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> CheckpointQuantization.parse(json.readTree(c[0])));
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
        }
        CheckpointQuantization q = CheckpointQuantization.read(Exl3Fixtures.model("mul1").resolve("config.json"));
        assertEquals("exl3 checkpoint (trellis-coded weights, 4.0 bits a weight, head 6, mul1 codebook; exllamav3 1.4.1)", q.describe());
        // a layer with a bias, one with two codebooks, one with another multiplier, one without its input signs, one with a
        // trellis of the wrong shape: each refused naming the tensor
        Path src = Exl3Fixtures.model("mixed-mcg");
        String up = "model.layers.1.mlp.up_proj.";
        byte[] mul1 = java.nio.ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(Exl3Codebook.MUL1.multiplier).array();
        byte[] other = java.nio.ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(12345).array();
        record Case(String label, java.util.function.Consumer<SafetensorsWriter> edit, String message) {
        }
        for (Case c : new Case[]{
                new Case("bias", w -> w.put(up + "bias", "F16", new long[]{320}, new byte[640]), "'" + up + "bias': a linear layer's bias"),
                new Case("two", w -> w.put(up + "mul1", "I32", new long[]{}, mul1), "names two codebooks"),
                new Case("other", w -> w.put(up + "mcg", "I32", new long[]{}, other), "should be one I32 holding 0xcbac1fed"),
                new Case("signs", w -> w.entries().remove(up + "suh"), "has neither '" + up + "suh' nor '" + up + "su'"),
                new Case("shape", w -> w.put(up + "trellis", "I16", new long[]{8, 20, 48}, new byte[8 * 20 * 48 * 2]), "expected I16 [8, 24, 16 K]")}) {
            Path d = tmp.resolve(c.label());
            Files.createDirectories(d);
            Files.copy(src.resolve("config.json"), d.resolve("config.json"));
            SafetensorsWriter w = SafetensorsWriter.copyOf(src.resolve("model.safetensors"));
            c.edit().accept(w);
            w.write(d.resolve("model.safetensors"));
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelLoader.load(d, LoadFormat.SAFETENSORS, LoadListener.NONE).close());
            assertTrue(e.getMessage().contains(c.message()), c.label() + ": " + e.getMessage());
        }
    }
}

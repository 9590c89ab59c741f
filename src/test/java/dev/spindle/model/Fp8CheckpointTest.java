package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * fp8 checkpoints as others publish them load as they are: one written here from the bundled bf16 model (each linear layer
 * quantized as --quantization does, stored as F8_E4M3 with its scales under the publisher's names) gives the same logits,
 * bit for bit, as the bf16 release quantized at load; configs and files that do not fit are refused by field and name.
 */
class Fp8CheckpointTest {
    static final Path CHAT = Path.of("models/spindle-chat-target");
    static final int[] PROMPT = {4000, 331, 558, 260, 568, 898, 1023, 1088, 1108, 1110, 1063, 1093, 974, 709, 1030, 786, 975, 988, 807, 962};

    /** The bundled model rewritten as an fp8 checkpoint: scales of blockRows x blockCols named by scaleSuffix, config edited by {@code config}. */
    private static Path write(Path dir, int blockRows, int blockCols, String scaleSuffix, Consumer<ObjectNode> config) throws IOException {
        Files.createDirectories(dir);
        ObjectNode c = (ObjectNode) new ObjectMapper().readTree(CHAT.resolve("config.json").toFile());
        config.accept(c);
        Files.writeString(dir.resolve("config.json"), c.toString());
        SafetensorsWriter w = SafetensorsWriter.copyOf(CHAT.resolve("model.safetensors"));
        try (Arena arena = Arena.ofConfined(); LoadedModel m = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            for (LayerWeights l : m.weights().layers()) {
                for (Matrix x : new Matrix[]{l.q(), l.k(), l.v(), l.o(), l.gate(), l.up(), l.down()}) {
                    Fp8Matrix f = Fp8Quantizer.quantize((Bf16Matrix) x, blockRows, Math.min(blockCols, x.cols()), arena);
                    w.put(x.name(), "F8_E4M3", f.data().shape(), f.data().data().toArray(ValueLayout.JAVA_BYTE));
                    String scale = x.name().substring(0, x.name().length() - "weight".length()) + scaleSuffix;
                    w.put(scale, "F32", f.scales().shape(), f.scales().data().toArray(ValueLayout.JAVA_BYTE));
                }
            }
        }
        w.write(dir.resolve("model.safetensors"));
        return dir;
    }

    private static float[][] logits(Path dir, Quantization q) {
        try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, q);
             CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 16, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            assertInstanceOf(Fp8Matrix.class, m.weights().layers().getFirst().down());
            return SoloWindow.run(cpu, PROMPT, new BlockTable(new BlockPool(cpu.kvCapacity())), true);
        }
    }

    @Test
    void anHfBlockFp8CheckpointEqualsTheReleaseQuantizedAtLoad(@TempDir Path tmp) throws IOException {
        Path dir = write(tmp.resolve("fp8"), 128, 128, "weight_scale_inv", c -> c.putObject("quantization_config").put("quant_method", "fp8")
                .put("activation_scheme", "dynamic").put("fmt", "e4m3").putArray("weight_block_size").add(128).add(128));
        assertArrayEquals(logits(CHAT, Quantization.FP8_BLOCK), logits(dir, Quantization.NONE));
    }

    @Test
    void aCompressedTensorsChannelCheckpointEqualsPerRowQuantization(@TempDir Path tmp) throws IOException {
        Path dir = write(tmp.resolve("ct"), 1, Integer.MAX_VALUE, "weight_scale", c -> {
            ObjectNode q = c.putObject("quantization_config").put("quant_method", "compressed-tensors").put("format", "float-quantized");
            ObjectNode g = q.putObject("config_groups").putObject("group_0");
            g.putArray("targets").add("Linear");
            g.putObject("weights").put("num_bits", 8).put("type", "float").put("strategy", "channel").put("symmetric", true).put("dynamic", false);
            g.putObject("input_activations").put("num_bits", 8).put("type", "float").put("strategy", "token").put("dynamic", true);
            q.putArray("ignore").add("lm_head");
        });
        assertArrayEquals(logits(CHAT, Quantization.FP8_ROW), logits(dir, Quantization.NONE));
    }

    /** ModelOpt's FP8 export (hf_quant_config.json beside a config without quantization_config), per channel and per tensor. */
    @Test
    void aModelOptFp8ExportReadsAsItsScalesSay(@TempDir Path tmp) throws IOException {
        Path dir = write(tmp.resolve("modelopt"), 1, Integer.MAX_VALUE, "weight_scale", c -> { });
        Files.writeString(dir.resolve("hf_quant_config.json"), "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.29.0\"},"
                + " \"quantization\": {\"quant_algo\": \"FP8_PER_CHANNEL_PER_TOKEN\", \"kv_cache_quant_algo\": null, \"exclude_modules\": [\"lm_head\"]}}");
        assertArrayEquals(logits(CHAT, Quantization.FP8_ROW), logits(dir, Quantization.NONE));
        CheckpointQuantization perTensor = CheckpointQuantization.parse(new ObjectMapper().readTree(
                "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\", \"ignore\": [\"lm_head\"]}}"));
        assertEquals("modelopt fp8-e4m3 checkpoint (one scale a tensor; its static activation scales unused: activations stay bf16)", perTensor.describe());
        assertEquals(false, perTensor.quantizes("lm_head.weight"));
    }

    @Test
    void configsAndFilesThatDoNotFitAreRefusedByFieldAndName(@TempDir Path tmp) throws IOException {
        Map<String, Consumer<ObjectNode>> bad = Map.of(
                "quantization_config.quant_method", c -> c.putObject("quantization_config").put("quant_method", "awq"),
                "quantization_config.fmt", c -> c.putObject("quantization_config").put("quant_method", "fp8").put("fmt", "e5m2"),
                "quantization_config.weight_block_size", c -> c.putObject("quantization_config").put("quant_method", "fp8").putArray("weight_block_size").add(128));
        for (Map.Entry<String, Consumer<ObjectNode>> e : bad.entrySet()) {
            Path dir = write(tmp.resolve(e.getKey()), 128, 128, "weight_scale_inv", e.getValue());
            ModelLoadException x = assertThrows(ModelLoadException.class, () -> ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE));
            assertTrue(x.getMessage().contains(e.getKey()) && x.getMessage().contains("config.json"), x.getMessage());
        }
        // the scales under another name than the config says: the missing one is named
        Path wrongName = write(tmp.resolve("names"), 128, 128, "weight_scale", c -> c.putObject("quantization_config").put("quant_method", "fp8")
                .putArray("weight_block_size").add(128).add(128));
        ModelLoadException x = assertThrows(ModelLoadException.class, () -> ModelLoader.load(wrongName, LoadFormat.SAFETENSORS, LoadListener.NONE));
        assertTrue(x.getMessage().contains("weight_scale_inv' is missing"), x.getMessage());
        // fp8 tensors without a quantization_config
        Path none = write(tmp.resolve("none"), 128, 128, "weight_scale_inv", c -> { });
        x = assertThrows(ModelLoadException.class, () -> ModelLoader.load(none, LoadFormat.SAFETENSORS, LoadListener.NONE));
        assertTrue(x.getMessage().contains("F8_E4M3") && x.getMessage().contains("quantization_config"), x.getMessage());
    }
}

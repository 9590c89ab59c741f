package dev.spindle.model;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.Fixture;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every broken input gives its own readable error naming the file, tensor or field: never a crash or garbage. */
class MalformedInputTest {
    static final Path SOURCE = Fixture.ROOT.resolve("llama-gqa");
    @TempDir
    Path dir;
    Path st;

    @BeforeEach
    void copyConfig() throws IOException {
        Files.copy(SOURCE.resolve("config.json"), dir.resolve("config.json"));
        st = dir.resolve("model.safetensors");
    }

    String loadError() {
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE).close());
        System.out.println("[malformed] " + e.getMessage());
        return e.getMessage();
    }

    static void assertMentions(String message, String... parts) {
        for (String p : parts) {
            assertTrue(message.contains(p), "error should mention '" + p + "': " + message);
        }
    }

    @Test
    void truncatedFile() throws IOException {
        byte[] all = Files.readAllBytes(SOURCE.resolve("model.safetensors"));
        Files.write(st, Arrays.copyOf(all, all.length - 1000));
        assertMentions(loadError(), st.toString(), "model.layers.2.self_attn.v_proj.weight", "outside the data section", "truncated");
    }

    @Test
    void truncatedInsideHeader() throws IOException {
        byte[] all = Files.readAllBytes(SOURCE.resolve("model.safetensors"));
        Files.write(st, Arrays.copyOf(all, 100));
        assertMentions(loadError(), st.toString(), "header length", "truncated");
    }

    @Test
    void emptyFile() throws IOException {
        Files.write(st, new byte[3]);
        assertMentions(loadError(), st.toString(), "too short");
    }

    @Test
    void headerNotJson() {
        SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors")).writeRaw(st, "{\"a\": [1, 2".getBytes(StandardCharsets.UTF_8));
        assertMentions(loadError(), st.toString(), "not well-formed JSON");
    }

    @Test
    void overlappingOffsets() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        ObjectNode h = w.header();
        // give model.norm.weight the bytes that start inside the previous tensor
        var norm = (ObjectNode) h.get("model.norm.weight");
        long begin = norm.get("data_offsets").get(0).asLong();
        long len = norm.get("data_offsets").get(1).asLong() - begin;
        norm.putArray("data_offsets").add(begin - 64).add(begin - 64 + len);
        w.write(st, h);
        assertMentions(loadError(), st.toString(), "model.norm.weight", "overlap");
    }

    @Test
    void offsetsOutOfRange() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        ObjectNode h = w.header();
        ((ObjectNode) h.get("model.embed_tokens.weight")).putArray("data_offsets").add(0).add(1L << 40);
        w.write(st, h);
        assertMentions(loadError(), st.toString(), "model.embed_tokens.weight", "outside the data section");
    }

    @Test
    void byteLengthDisagreesWithShape() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        ObjectNode h = w.header();
        ((ObjectNode) h.get("model.norm.weight")).putArray("shape").add(64);
        w.write(st, h);
        assertMentions(loadError(), st.toString(), "model.norm.weight", "needs 128 bytes", "span 256");
    }

    @Test
    void missingTensor() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        w.entries().remove("model.layers.1.mlp.up_proj.weight");
        w.write(st);
        assertMentions(loadError(), "missing 1 tensor", "model.layers.1.mlp.up_proj.weight [320, 128]");
    }

    @Test
    void wrongShape() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        var e = w.entries().get("model.layers.0.self_attn.k_proj.weight");
        w.put("model.layers.0.self_attn.k_proj.weight", "BF16", new long[]{128, 32}, e.data());
        w.write(st);
        assertMentions(loadError(), st.toString(), "model.layers.0.self_attn.k_proj.weight", "[128, 32]", "expected [32, 128]");
    }

    @Test
    void badDtype() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        ObjectNode h = w.header();
        ((ObjectNode) h.get("model.layers.2.input_layernorm.weight")).put("dtype", "Q4_K");
        w.write(st, h);
        assertMentions(loadError(), st.toString(), "model.layers.2.input_layernorm.weight", "Q4_K", "expected BF16, F16 or F32");
    }

    @Test
    void unexpectedTensorIsReportedButInvFreqIgnored() {
        SafetensorsWriter w = SafetensorsWriter.copyOf(SOURCE.resolve("model.safetensors"));
        w.put("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", new long[]{8}, new byte[32]);
        w.write(st);
        ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE).close();
        w.put("model.layers.0.self_attn.q_proj.bias", "BF16", new long[]{128}, new byte[256]);
        w.write(st);
        assertMentions(loadError(), st.toString(), "unexpected tensor", "model.layers.0.self_attn.q_proj.bias");
    }

    @Test
    void shardIndexNamesMissingFile() throws IOException {
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}");
        assertMentions(loadError(), Checkpoint.INDEX, "model-00001-of-00002.safetensors", "not in");
    }

    @Test
    void noWeightsAtAll() {
        assertMentions(loadError(), dir.toString(), "no model.safetensors");
    }

    @Test
    void unsupportedConfigFlag() throws IOException {
        String cfg = Files.readString(SOURCE.resolve("config.json"));
        Files.writeString(dir.resolve("config.json"), cfg.replace("\"mlp_bias\": false", "\"mlp_bias\": true"));
        assertMentions(loadError(), "config.json", "'mlp_bias'", "does not implement");
    }
}

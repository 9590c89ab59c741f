package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ConfigParserTest {
    static final Path SHAPES = Path.of("models/shapes");

    static ObjectNode looped() {
        ObjectNode c = new ObjectMapper().createObjectNode();
        c.putArray("architectures").add("NanbeigeForCausalLM");
        c.put("model_type", "nanbeige").put("vocab_size", 166144).put("hidden_size", 3072).put("intermediate_size", 10752)
                .put("num_hidden_layers", 22).put("num_attention_heads", 48).put("num_key_value_heads", 8).put("head_dim", 128)
                .put("rope_theta", 7e7).put("rms_norm_eps", 1e-5).put("max_position_embeddings", 262144).put("eos_token_id", 166101);
        c.putNull("rope_scaling");
        c.putArray("loop_loss_weights").add(0.5);
        c.put("enable_hyper_connection", false).put("loop_share_kv", false);
        return c;
    }

    @Test
    void nanbeige42Shape() {
        ModelConfig c = ConfigParser.parse(looped());
        assertEquals(Family.NANBEIGE_LOOPED, c.family());
        assertEquals(2, c.numLoops(), "num_loops = len(loop_loss_weights) + 1");
        assertEquals(44, c.executedLayers());
        assertEquals(6144, c.qDim(), "head_dim is independent of hidden / heads");
        assertFalse(c.tiedEmbeddings());
        assertFalse(c.skipLoopFinalNorm());
    }

    @ParameterizedTest
    @ValueSource(strings = {"nanbeige4.1-3b-shape", "nanbeige4.2-3b-shape", "nanbeige4.3-33b-shape"})
    void sharedShapesParse(String name) {
        Path p = SHAPES.resolve(name).resolve("config.json");
        
        ModelConfig c = ConfigParser.read(p);
        assertTrue(c.parameterCount() > 1_000_000_000L);
    }

    @ParameterizedTest
    @ValueSource(strings = {"enable_double_loop_split", "loop_share_kv", "enable_hyper_connection", "enable_mhc",
            "enable_depth_attention", "qk_layernorm", "use_ngram_embedding", "attention_bias"})
    void refusesResearchFeaturesByName(String field) {
        ObjectNode c = looped().put(field, true);
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ConfigParser.parse(c));
        assertTrue(e.getMessage().contains("'" + field + "'"), e.getMessage());
    }

    @Test
    void refusesRopeScaling() {
        ObjectNode c = looped();
        c.putObject("rope_scaling").put("rope_type", "yarn").put("factor", 4.0);
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ConfigParser.parse(c));
        assertTrue(e.getMessage().contains("rope type 'yarn'") && e.getMessage().contains("not supported yet"), e.getMessage());
    }

    @Test
    void acceptsTransformers5RopeParameters() {
        ObjectNode c = looped();
        c.remove("rope_theta");
        c.putObject("rope_parameters").put("rope_type", "default").put("rope_theta", 1.2e8);
        assertEquals(1.2e8, ConfigParser.parse(c).ropeTheta());
    }

    @Test
    void inconsistentLoopCount() {
        ObjectNode c = looped().put("num_loops", 3);
        assertThrows(ModelLoadException.class, () -> ConfigParser.parse(c));
    }

    @Test
    void badFieldsAreNamed() {
        ObjectNode c = looped().put("num_key_value_heads", 7);
        assertTrue(assertThrows(ModelLoadException.class, () -> ConfigParser.parse(c)).getMessage().contains("num_key_value_heads"));
        ObjectNode d = looped().put("hidden_size", "big");
        assertTrue(assertThrows(ModelLoadException.class, () -> ConfigParser.parse(d)).getMessage().contains("'hidden_size'"));
        ObjectNode e = looped();
        e.putArray("architectures").add("MixtralForCausalLM");
        assertTrue(assertThrows(ModelLoadException.class, () -> ConfigParser.parse(e)).getMessage().contains("MixtralForCausalLM"));
        ObjectNode f = looped().put("hidden_act", "gelu");
        assertTrue(assertThrows(ModelLoadException.class, () -> ConfigParser.parse(f)).getMessage().contains("hidden_act"));
    }

    @Test
    void missingFileIsNamed(@org.junit.jupiter.api.io.TempDir Path dir) throws IOException {
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ConfigParser.read(dir.resolve("config.json")));
        assertTrue(e.getMessage().contains("config.json"));
        java.nio.file.Files.writeString(dir.resolve("config.json"), "{\"model_type\": ");
        assertTrue(assertThrows(ModelLoadException.class, () -> ConfigParser.read(dir.resolve("config.json"))).getMessage().contains("not valid JSON"));
    }
}

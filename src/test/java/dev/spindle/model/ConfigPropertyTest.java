package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A config.json, whatever its fields hold, gives a ModelConfig (or a draft head's DraftHeadConfig) or a
 * ModelLoadException naming the field: never another exception, and never a value read other than as written (a token
 * id of 2.7 or 2^33 is refused, not read as 2 or 0). Configs are a valid llama, looped Nanbeige or DFlash2 head config
 * with some fields replaced by JSON values of any kind (zero, negative, past an int, fractional, text, lists, objects,
 * null) or left out.
 */
class ConfigPropertyTest {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final List<String> FIELDS = List.of("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
            "num_hidden_layers", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "bos_token_id", "eos_token_id",
            "tie_word_embeddings", "num_loops", "loop_loss_weights", "skip_loop_final_norm", "hidden_act", "rope_scaling", "architectures",
            "model_type");

    private static final List<JsonNode> INTS = List.of(0, 1, 2, 7, 8, 64, -1, Integer.MAX_VALUE).stream().map(n -> (JsonNode) NODES.numberNode(n)).toList();
    private static final List<JsonNode> OTHERS = List.of(NODES.numberNode(1L << 33), NODES.numberNode(BigInteger.ONE.shiftLeft(70)), NODES.numberNode(2.7),
            NODES.numberNode(1e-5), NODES.numberNode(Double.NaN), NODES.textNode("7"), NODES.textNode("silu"), NODES.textNode("default"),
            NODES.booleanNode(true), NODES.booleanNode(false), NODES.nullNode());

    /** Half the time a small or edge int, else a long, a big integer, a fraction, NaN, text, a boolean or null. */
    private static JsonNode scalar(RandomGenerator r) {
        return Trials.oneOf(r, r.nextBoolean() ? INTS : OTHERS);
    }

    private static JsonNode value(RandomGenerator r) {
        return switch (Trials.frequency(r, 6, 2, 1)) {
            case 0 -> scalar(r);
            case 1 -> array(Trials.listOf(r, 0, 3, ConfigPropertyTest::scalar));
            default -> NODES.objectNode().set("rope_type", scalar(r));
        };
    }

    private static ArrayNode array(List<JsonNode> items) {
        ArrayNode a = NODES.arrayNode();
        items.forEach(a::add);
        return a;
    }

    /** Up to four edits to the named fields: each sets a field to a generated value, or removes it. */
    record Edit(String field, JsonNode value, boolean remove) {
    }

    private static List<Edit> edits(RandomGenerator r, List<String> fields) {
        return Trials.listOf(r, 0, 4, g -> new Edit(Trials.oneOf(g, fields), value(g), g.nextBoolean()));
    }

    static ObjectNode config(RandomGenerator r) {
        boolean looped = r.nextBoolean();
        ObjectNode c = NODES.objectNode();
        c.putArray("architectures").add(looped ? "NanbeigeForCausalLM" : "LlamaForCausalLM");
        c.put("model_type", looped ? "nanbeige" : "llama").put("hidden_size", 64).put("num_attention_heads", 4).put("num_key_value_heads", 2)
                .put("intermediate_size", 128).put("num_hidden_layers", 2).put("vocab_size", 300).put("max_position_embeddings", 512)
                .put("rms_norm_eps", 1e-5).put("rope_theta", 10000.0).put("bos_token_id", 1).put("hidden_act", "silu");
        c.putArray("eos_token_id").add(2).add(3);
        if (looped) {
            c.put("num_loops", 2);
        }
        for (Edit e : edits(r, FIELDS)) {
            if (e.remove()) {
                c.remove(e.field());
            } else {
                c.set(e.field(), e.value());
            }
        }
        return c;
    }

    private static final List<String> HEAD_FIELDS = List.of("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "num_target_layers", "vocab_size", "sliding_window", "is_causal", "layer_types", "rms_norm_eps",
            "dflash_config.block_size", "dflash_config.mask_token_id", "dflash_config.target_layer_ids", "dflash_config.conv_kernel_size",
            "dflash_config.conv_group_size", "dflash_config.selector_rank", "dflash_config.selector_top_k", "dflash_config.output_multiplier");

    private static final ObjectNode HEAD;

    static {
        try {
            HEAD = (ObjectNode) new ObjectMapper().readTree(Path.of("models/spindle-chat-dflash2/config.json").toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The bundled DFlash2 head's config (models/spindle-chat-dflash2) with some fields replaced by JSON values of any kind, or left out. */
    static ObjectNode headConfig(RandomGenerator r) {
        ObjectNode c = HEAD.deepCopy();
        for (Edit e : edits(r, HEAD_FIELDS)) {
            ObjectNode owner = e.field().startsWith("dflash_config.") ? (ObjectNode) c.get("dflash_config") : c;
            String name = e.field().replace("dflash_config.", "");
            if (e.remove()) {
                owner.remove(name);
            } else {
                owner.set(name, e.value());
            }
        }
        return c;
    }

    @Test
    void aDraftHeadConfigIsReadAsWrittenOrRefusedByField() {
        Trials.forAll(3000, ConfigPropertyTest::headConfig, ConfigPropertyTest::aDraftHeadConfigIsReadAsWrittenOrRefusedByField);
    }

    static void aDraftHeadConfigIsReadAsWrittenOrRefusedByField(ObjectNode config) {
        DraftHeadConfig h;
        try {
            h = DraftHeadConfig.parse(config);
        } catch (ModelLoadException refused) {
            assertTrue(refused.getMessage().contains("field '") || refused.getMessage().contains("fields '"), "names the field: " + refused.getMessage());
            return;
        }
        JsonNode d = config.get("dflash_config");
        assertTrue(d.get("mask_token_id").isIntegralNumber() && d.get("mask_token_id").canConvertToInt(), "accepted mask_token_id " + d.get("mask_token_id"));
        assertEquals(d.get("mask_token_id").intValue(), h.maskTokenId());
        JsonNode block = d.get("block_size"); // absent or null: the default, 16
        boolean given = block != null && !block.isNull();
        assertTrue(!given || block.isIntegralNumber() && block.canConvertToInt(), "accepted block_size " + block);
        assertEquals(given ? block.intValue() : 16, h.blockSize());
        for (int i = 0; i < h.targetLayerIds().length; i++) {
            JsonNode id = d.get("target_layer_ids").get(i);
            assertTrue(id.isIntegralNumber() && id.canConvertToInt() && id.intValue() == h.targetLayerIds()[i], "accepted target_layer_ids " + d.get("target_layer_ids"));
        }
        assertTrue(h.hidden() > 0 && h.layers() > 0 && h.heads() > 0 && h.kvHeads() > 0 && h.headDim() > 0 && h.intermediate() > 0, h.describe());
    }

    @Test
    void aConfigIsReadAsWrittenOrRefusedByField() {
        Trials.forAll(3000, ConfigPropertyTest::config, ConfigPropertyTest::aConfigIsReadAsWrittenOrRefusedByField);
    }

    static void aConfigIsReadAsWrittenOrRefusedByField(ObjectNode config) {
        ModelConfig m;
        try {
            m = ConfigParser.parse(config);
        } catch (ModelLoadException refused) {
            assertTrue(refused.getMessage().startsWith("config: "), refused.getMessage());
            return;
        }
        List<Integer> eos = new ArrayList<>();
        JsonNode e = config.get("eos_token_id");
        if (e != null && !e.isNull()) {
            for (JsonNode id : e.isArray() ? e : NODES.arrayNode().add(e)) {
                assertTrue(id.isIntegralNumber() && id.canConvertToInt(), "accepted eos_token_id " + e + " in " + config);
                eos.add(id.intValue());
            }
        }
        assertEquals(eos, m.eosTokenIds(), "eos_token_id " + e);
        assertEquals(config.get("hidden_size").intValue(), m.hiddenSize());
        assertTrue(m.numHeads() % m.numKvHeads() == 0 && m.headDim() > 0 && m.numLoops() >= 1, m.toString());
    }
}

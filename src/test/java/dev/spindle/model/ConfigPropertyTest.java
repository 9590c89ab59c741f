package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

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

    private static Arbitrary<JsonNode> value() {
        Arbitrary<JsonNode> scalar = Arbitraries.oneOf(
                Arbitraries.of(0, 1, 2, 7, 8, 64, -1, Integer.MAX_VALUE).map(n -> (JsonNode) NODES.numberNode(n)),
                Arbitraries.of(NODES.numberNode(1L << 33), NODES.numberNode(BigInteger.ONE.shiftLeft(70)), NODES.numberNode(2.7), NODES.numberNode(1e-5),
                        NODES.numberNode(Double.NaN), NODES.textNode("7"), NODES.textNode("silu"), NODES.textNode("default"), NODES.booleanNode(true),
                        NODES.booleanNode(false), NODES.nullNode()));
        Arbitrary<JsonNode> list = scalar.list().ofMaxSize(3).map(ConfigPropertyTest::array);
        Arbitrary<JsonNode> object = scalar.map(v -> (JsonNode) NODES.objectNode().set("rope_type", v));
        return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(6, scalar), net.jqwik.api.Tuple.of(2, list), net.jqwik.api.Tuple.of(1, object));
    }

    private static ArrayNode array(List<JsonNode> items) {
        ArrayNode a = NODES.arrayNode();
        items.forEach(a::add);
        return a;
    }

    @Provide
    Arbitrary<ObjectNode> configs() {
        Arbitrary<List<Object[]>> changes = Combinators.combine(Arbitraries.of(FIELDS), value(), Arbitraries.of(true, false))
                .as((field, v, remove) -> new Object[]{field, v, remove}).list().ofMaxSize(4);
        return Combinators.combine(Arbitraries.of(true, false), changes).as((looped, edits) -> {
            ObjectNode c = NODES.objectNode();
            c.putArray("architectures").add(looped ? "NanbeigeForCausalLM" : "LlamaForCausalLM");
            c.put("model_type", looped ? "nanbeige" : "llama").put("hidden_size", 64).put("num_attention_heads", 4).put("num_key_value_heads", 2)
                    .put("intermediate_size", 128).put("num_hidden_layers", 2).put("vocab_size", 300).put("max_position_embeddings", 512)
                    .put("rms_norm_eps", 1e-5).put("rope_theta", 10000.0).put("bos_token_id", 1).put("hidden_act", "silu");
            c.putArray("eos_token_id").add(2).add(3);
            if (looped) {
                c.put("num_loops", 2);
            }
            for (Object[] e : edits) {
                if ((Boolean) e[2]) {
                    c.remove((String) e[0]);
                } else {
                    c.set((String) e[0], (JsonNode) e[1]);
                }
            }
            return c;
        });
    }

    private static final List<String> HEAD_FIELDS = List.of("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "num_target_layers", "vocab_size", "sliding_window", "is_causal", "layer_types", "rms_norm_eps",
            "dflash_config.block_size", "dflash_config.mask_token_id", "dflash_config.target_layer_ids", "dflash_config.conv_kernel_size",
            "dflash_config.conv_group_size", "dflash_config.selector_rank", "dflash_config.selector_top_k", "dflash_config.output_multiplier");

    /** The bundled DFlash2 head's config (models/spindle-chat-dflash2) with some fields replaced by JSON values of any kind, or left out. */
    @Provide
    Arbitrary<ObjectNode> headConfigs() {
        Arbitrary<List<Object[]>> changes = Combinators.combine(Arbitraries.of(HEAD_FIELDS), value(), Arbitraries.of(true, false))
                .as((field, v, remove) -> new Object[]{field, v, remove}).list().ofMaxSize(4);
        return changes.map(edits -> {
            ObjectNode c;
            try {
                c = (ObjectNode) new com.fasterxml.jackson.databind.ObjectMapper().readTree(java.nio.file.Path.of("models/spindle-chat-dflash2/config.json").toFile());
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            for (Object[] e : edits) {
                String field = (String) e[0];
                ObjectNode owner = field.startsWith("dflash_config.") ? (ObjectNode) c.get("dflash_config") : c;
                String name = field.replace("dflash_config.", "");
                if ((Boolean) e[2]) {
                    owner.remove(name);
                } else {
                    owner.set(name, (JsonNode) e[1]);
                }
            }
            return c;
        });
    }

    @Property(tries = 3000)
    void aDraftHeadConfigIsReadAsWrittenOrRefusedByField(@ForAll("headConfigs") ObjectNode config) {
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

    @Property(tries = 3000)
    void aConfigIsReadAsWrittenOrRefusedByField(@ForAll("configs") ObjectNode config) {
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

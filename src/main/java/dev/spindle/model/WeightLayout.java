package dev.spindle.model;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The tensor names and shapes a llama-family checkpoint of a given config must hold. */
public final class WeightLayout {
    public static final String EMBED = "model.embed_tokens.weight";
    public static final String NORM = "model.norm.weight";
    public static final String LM_HEAD = "lm_head.weight";
    /** Tensors a checkpoint may carry that Spindle deliberately ignores (it computes rotary frequencies itself). */
    public static boolean ignorable(String name) {
        return name.endsWith("rotary_emb.inv_freq");
    }

    private WeightLayout() {
    }

    public static String layer(int i, String part) {
        return "model.layers." + i + "." + part + ".weight";
    }

    /** Name to expected shape, in load order. */
    public static Map<String, long[]> expected(ModelConfig c) {
        long h = c.hiddenSize();
        Map<String, long[]> m = new LinkedHashMap<>();
        m.put(EMBED, new long[]{c.vocabSize(), h});
        for (int i = 0; i < c.numLayers(); i++) {
            m.put(layer(i, "input_layernorm"), new long[]{h});
            m.put(layer(i, "self_attn.q_proj"), new long[]{c.qDim(), h});
            m.put(layer(i, "self_attn.k_proj"), new long[]{c.kvDim(), h});
            m.put(layer(i, "self_attn.v_proj"), new long[]{c.kvDim(), h});
            m.put(layer(i, "self_attn.o_proj"), new long[]{h, c.qDim()});
            m.put(layer(i, "post_attention_layernorm"), new long[]{h});
            m.put(layer(i, "mlp.gate_proj"), new long[]{c.intermediateSize(), h});
            m.put(layer(i, "mlp.up_proj"), new long[]{c.intermediateSize(), h});
            m.put(layer(i, "mlp.down_proj"), new long[]{h, c.intermediateSize()});
        }
        m.put(NORM, new long[]{h});
        if (!c.tiedEmbeddings()) {
            m.put(LM_HEAD, new long[]{c.vocabSize(), h});
        }
        return m;
    }

    /** Binds loaded tensors (by name) to their roles. */
    public static ModelWeights assemble(ModelConfig c, Map<String, Tensor> t) {
        return assemble(c, t, Map.of());
    }

    /** As {@link #assemble(ModelConfig, Map)}, the linear layers in {@code stored} (by name) in their stored format. */
    public static ModelWeights assemble(ModelConfig c, Map<String, Tensor> t, Map<String, Matrix> stored) {
        List<LayerWeights> layers = new ArrayList<>();
        for (int i = 0; i < c.numLayers(); i++) {
            layers.add(new LayerWeights(t.get(layer(i, "input_layernorm")), matrix(t, stored, layer(i, "self_attn.q_proj")),
                    matrix(t, stored, layer(i, "self_attn.k_proj")), matrix(t, stored, layer(i, "self_attn.v_proj")),
                    matrix(t, stored, layer(i, "self_attn.o_proj")), t.get(layer(i, "post_attention_layernorm")), matrix(t, stored, layer(i, "mlp.gate_proj")),
                    matrix(t, stored, layer(i, "mlp.up_proj")), matrix(t, stored, layer(i, "mlp.down_proj"))));
        }
        Tensor embed = t.get(EMBED);
        return new ModelWeights(embed, layers, t.get(NORM), c.tiedEmbeddings() ? new Bf16Matrix(embed) : matrix(t, stored, LM_HEAD));
    }

    /** A linear layer's weight: as the checkpoint stores it where quantized, else the bound bf16 tensor. */
    private static Matrix matrix(Map<String, Tensor> t, Map<String, Matrix> stored, String name) {
        Matrix m = stored.get(name);
        return m != null ? m : new Bf16Matrix(t.get(name));
    }
}

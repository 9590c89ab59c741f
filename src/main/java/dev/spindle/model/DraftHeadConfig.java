package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * A DFlash or DFlash2 draft head's config.json, as published ({@code architectures}
 * {@code DFlashDraftModel} or {@code DFlash2DraftModel}): a few Qwen3-style decoder layers (q/k norms,
 * RoPE) at the target's hidden size, without embedding or output head of their own. Draft settings
 * are read from {@code dflash_config} first, then from the top level (both layouts are published).
 * What Spindle does not implement is refused with the field named.
 *
 * @param targetLayerIds   the target layers whose outputs (HF {@code hidden_states[id + 1]}) feed the head, concatenated
 * @param sliding          per layer: whether it attends within {@code slidingWindow} positions only
 * @param causal           whether the block attends causally (the published heads: false, bidirectional inside the block)
 * @param outputMultiplier the target head's logits times this (1 for DFlash)
 * @param softcap          tanh soft-capping of the draft logits (0: none)
 * @param convKernel       DFlash2: the dynamic convolution's taps (0 for DFlash)
 * @param selectorRank     DFlash2: the candidate selector's rank (0 for DFlash)
 * @param selectorTopK     DFlash2: the target-head candidates the selector walks per row
 */
public record DraftHeadConfig(Kind kind, int hidden, int layers, int heads, int kvHeads, int headDim, int intermediate, float rmsNormEps,
                              double ropeTheta, int blockSize, int maskTokenId, int[] targetLayerIds, int numTargetLayers, boolean[] sliding,
                              int slidingWindow, boolean causal, float inputEmbeddingScale, float outputMultiplier, float softcap,
                              int convKernel, int convGroup, int selectorRank, int selectorTopK, int vocabSize) {

    /** DFlash (argmax per row) or DFlash2 (dynamic convolutions and the candidate selector). */
    public enum Kind { DFLASH, DFLASH2 }

    private static final Set<String> ARCHITECTURES = Set.of("DFlashDraftModel", "DFlash2DraftModel");

    public static DraftHeadConfig read(Path dir) {
        Path file = dir.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            throw new ModelLoadException(file + ": not found (a draft head's directory needs config.json)");
        }
        JsonNode c;
        try {
            c = new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            throw new ModelLoadException(file + ": not valid JSON: " + e.getMessage(), e);
        }
        try {
            return parse(c);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(file + ": " + e.getMessage(), e);
        }
    }

    /** Whether a directory holds a DFlash-family head (by its config's architecture). */
    public static boolean isDraftHead(Path dir) {
        try {
            JsonNode a = new ObjectMapper().readTree(dir.resolve("config.json").toFile()).path("architectures");
            return a.isArray() && !a.isEmpty() && ARCHITECTURES.contains(a.get(0).asText());
        } catch (IOException e) {
            return false;
        }
    }

    public static DraftHeadConfig parse(JsonNode c) {
        JsonNode archs = c.path("architectures");
        String arch = archs.isArray() && !archs.isEmpty() ? archs.get(0).asText() : "";
        if (!ARCHITECTURES.contains(arch)) {
            throw new ModelLoadException("field 'architectures' must be [\"DFlashDraftModel\"] or [\"DFlash2DraftModel\"], found " + archs);
        }
        Kind kind = arch.equals("DFlash2DraftModel") ? Kind.DFLASH2 : Kind.DFLASH;
        JsonNode d = c.path("dflash_config");
        if (c.path("attention_bias").asBoolean(false)) {
            throw new ModelLoadException("field 'attention_bias' is true; Spindle's draft heads have no biases");
        }
        String act = c.path("hidden_act").asText("silu");
        if (!act.equals("silu")) {
            throw new ModelLoadException("field 'hidden_act' is '" + act + "'; only silu is implemented");
        }
        int hidden = positiveInt(c, "hidden_size");
        int layers = positiveInt(c, "num_hidden_layers");
        if (layers > ModelConfig.MAX_LAYERS) {
            throw new ModelLoadException("field 'num_hidden_layers' = " + layers + " is past " + ModelConfig.MAX_LAYERS + " (a corrupt config?)");
        }
        int heads = positiveInt(c, "num_attention_heads");
        int kvHeads = c.hasNonNull("num_key_value_heads") ? positiveInt(c, "num_key_value_heads") : heads;
        int headDim = c.hasNonNull("head_dim") ? positiveInt(c, "head_dim") : hidden / heads;
        if (headDim <= 0) {
            throw new ModelLoadException("field 'hidden_size' (" + hidden + ") over 'num_attention_heads' (" + heads + ") leaves no head dimension; give head_dim");
        }
        if (heads % kvHeads != 0) {
            throw new ModelLoadException("field 'num_attention_heads' (" + heads + ") must be a multiple of 'num_key_value_heads' (" + kvHeads + ")");
        }
        JsonNode ids = draft(c, d, "target_layer_ids");
        if (ids == null || !ids.isArray() || ids.isEmpty()) {
            throw new ModelLoadException("field 'dflash_config.target_layer_ids' is required: the target layers the head reads");
        }
        int[] target = new int[ids.size()];
        for (int i = 0; i < target.length; i++) {
            if (!exactInt(ids.get(i)) || ids.get(i).intValue() < 0) {
                throw new ModelLoadException("field 'dflash_config.target_layer_ids[" + i + "]' must be a layer index >= 0, found " + ids.get(i));
            }
            target[i] = ids.get(i).intValue();
        }
        JsonNode mask = draft(c, d, "mask_token_id");
        if (mask == null || !exactInt(mask)) {
            throw new ModelLoadException("field 'dflash_config.mask_token_id' is required (the token that fills a block's unknown positions), an integer, found " + mask);
        }
        JsonNode block = draft(c, d, "block_size");
        if (block != null && (!exactInt(block) || block.intValue() < 2)) {
            throw new ModelLoadException("field 'block_size' must be an integer of at least 2, found " + block);
        }
        int blockSize = block == null ? 16 : block.intValue();
        boolean[] sliding = new boolean[layers];
        JsonNode types = c.get("layer_types");
        if (types != null && !types.isNull()) {
            if (!types.isArray() || types.size() != layers) {
                throw new ModelLoadException("field 'layer_types' must list one type per layer (" + layers + "), found " + types);
            }
            for (int i = 0; i < layers; i++) {
                String t = types.get(i).asText();
                if (!t.equals("full_attention") && !t.equals("sliding_attention")) {
                    throw new ModelLoadException("field 'layer_types[" + i + "]' is '" + t + "'; full_attention and sliding_attention are implemented");
                }
                sliding[i] = t.equals("sliding_attention");
            }
        }
        int window = c.hasNonNull("sliding_window") ? requiredInt(c, "sliding_window") : 0;
        boolean anySliding = false;
        for (boolean s : sliding) {
            anySliding |= s;
        }
        if (anySliding && window < 1) {
            throw new ModelLoadException("field 'sliding_window' must be a positive integer when a layer is sliding_attention");
        }
        // the reference's rule: an explicit is_causal wins; otherwise a sliding layer is causal, a full one bidirectional
        JsonNode causalNode = c.get("is_causal");
        boolean causal;
        if (causalNode != null && !causalNode.isNull()) {
            causal = causalNode.asBoolean();
        } else {
            for (int i = 1; i < layers; i++) {
                if (sliding[i] != sliding[0]) {
                    throw new ModelLoadException("field 'layer_types' mixes sliding and full layers without 'is_causal'; their causality would differ "
                            + "per layer, which Spindle does not implement");
                }
            }
            causal = layers > 0 && sliding[0];
        }
        if (causal) {
            throw new ModelLoadException("field 'is_causal' (or sliding layer_types without it) makes the block causal; Spindle implements the "
                    + "published bidirectional block (is_causal false)");
        }
        float softcap = (float) number(draft(c, d, "final_logit_softcapping"), "final_logit_softcapping", 0);
        int convKernel = 0, convGroup = 0, rank = 0, topK = 0;
        if (kind == Kind.DFLASH2) {
            convKernel = requiredDraftInt(c, d, "conv_kernel_size");
            convGroup = requiredDraftInt(c, d, "conv_group_size");
            rank = requiredDraftInt(c, d, "selector_rank");
            topK = requiredDraftInt(c, d, "selector_top_k");
            if (convKernel < 1 || convGroup < 1 || hidden % convGroup != 0) {
                throw new ModelLoadException("fields 'conv_kernel_size' and 'conv_group_size' must be positive and the group must divide hidden_size "
                        + hidden + "; found " + convKernel + " and " + convGroup);
            }
        }
        return new DraftHeadConfig(kind, hidden, layers, heads, kvHeads, headDim, positiveInt(c, "intermediate_size"),
                (float) number(c.get("rms_norm_eps"), "rms_norm_eps", 1e-6), ConfigParser.ropeTheta(c), blockSize, mask.intValue(), target,
                c.hasNonNull("num_target_layers") ? requiredInt(c, "num_target_layers") : -1, sliding, window, false,
                (float) number(draft(c, d, "input_embedding_scale"), "input_embedding_scale", 1),
                (float) number(draft(c, d, "output_multiplier"), "output_multiplier", 1), softcap,
                convKernel, convGroup, rank, topK, c.hasNonNull("vocab_size") ? requiredInt(c, "vocab_size") : -1);
    }

    /** The same head drafting blocks of another size (the head is trained at one, any size runs). */
    public DraftHeadConfig withBlockSize(int size) {
        return new DraftHeadConfig(kind, hidden, layers, heads, kvHeads, headDim, intermediate, rmsNormEps, ropeTheta, size, maskTokenId,
                targetLayerIds, numTargetLayers, sliding, slidingWindow, causal, inputEmbeddingScale, outputMultiplier, softcap, convKernel,
                convGroup, selectorRank, selectorTopK, vocabSize);
    }

    /** The checks against the target the head drafts for: hidden size, vocabulary, and the tap layers it has. */
    public void checkTarget(ModelConfig target, int tapOffset) {
        if (target.hiddenSize() != hidden) {
            throw new ModelLoadException("the draft head's hidden_size " + hidden + " is not the target's " + target.hiddenSize());
        }
        int executed = target.numLayers() * target.numLoops();
        if (numTargetLayers > 0 && numTargetLayers != executed) {
            throw new ModelLoadException("the draft head was trained on a target of num_target_layers " + numTargetLayers + ", this target runs " + executed);
        }
        for (int id : targetLayerIds) {
            int tap = id + tapOffset - 1;
            if (tap < 0 || tap >= executed) {
                throw new ModelLoadException("target_layer_ids " + id + " with tap offset " + tapOffset + " reads after layer " + tap
                        + ", outside the target's " + executed + " layers");
            }
        }
        if (maskTokenId < 0 || maskTokenId >= target.vocabSize()) {
            throw new ModelLoadException("mask_token_id " + maskTokenId + " is outside the target's vocabulary [0, " + target.vocabSize() + ")");
        }
        if (vocabSize > 0 && vocabSize != target.vocabSize() && kind == Kind.DFLASH2) {
            throw new ModelLoadException("the DFlash2 head's vocab_size " + vocabSize + " (its codebooks) is not the target's " + target.vocabSize());
        }
    }

    /** The executed target layers after which the residual stream is tapped (0-based), for a tap offset (1: the paper's, HF hidden_states[id + 1]). */
    public int[] tapLayers(int tapOffset) {
        int[] t = new int[targetLayerIds.length];
        for (int i = 0; i < t.length; i++) {
            t[i] = targetLayerIds[i] + tapOffset - 1;
        }
        return t;
    }

    /** The tensors the head's checkpoint holds (names without the optional {@code model.} prefix), with their shapes. */
    public java.util.Map<String, long[]> expectedTensors() {
        java.util.Map<String, long[]> m = new java.util.LinkedHashMap<>();
        m.put("fc.weight", new long[]{hidden, (long) targetLayerIds.length * hidden});
        m.put("hidden_norm.weight", new long[]{hidden});
        m.put("norm.weight", new long[]{hidden});
        for (int l = 0; l < layers; l++) {
            String p = "layers." + l + ".";
            m.put(p + "input_layernorm.weight", new long[]{hidden});
            m.put(p + "post_attention_layernorm.weight", new long[]{hidden});
            m.put(p + "self_attn.q_proj.weight", new long[]{(long) heads * headDim, hidden});
            m.put(p + "self_attn.k_proj.weight", new long[]{(long) kvHeads * headDim, hidden});
            m.put(p + "self_attn.v_proj.weight", new long[]{(long) kvHeads * headDim, hidden});
            m.put(p + "self_attn.o_proj.weight", new long[]{hidden, (long) heads * headDim});
            m.put(p + "self_attn.q_norm.weight", new long[]{headDim});
            m.put(p + "self_attn.k_norm.weight", new long[]{headDim});
            m.put(p + "mlp.gate_proj.weight", new long[]{intermediate, hidden});
            m.put(p + "mlp.up_proj.weight", new long[]{intermediate, hidden});
            m.put(p + "mlp.down_proj.weight", new long[]{hidden, intermediate});
            if (kind == Kind.DFLASH2) {
                for (String conv : List.of("attention_conv", "mlp_conv")) {
                    m.put(p + conv + ".base_kernel", new long[]{2, convKernel, hidden});
                    m.put(p + conv + ".kernel_projection.weight", new long[]{2L * convKernel * (hidden / convGroup), hidden});
                }
            }
        }
        if (kind == Kind.DFLASH2) {
            m.put("candidate_selector.hidden_projection.weight", new long[]{selectorRank, hidden});
            m.put("candidate_selector.predecessor_codebook", new long[]{vocabSize, selectorRank});
            m.put("candidate_selector.successor_codebook", new long[]{vocabSize, selectorRank});
        }
        return m;
    }

    public String describe() {
        return (kind == Kind.DFLASH2 ? "DFlash2" : "DFlash") + " head: " + layers + " layers, block " + blockSize + ", taps of target layers "
                + java.util.Arrays.toString(targetLayerIds) + (kind == Kind.DFLASH2 ? ", selector top-" + selectorTopK + " rank " + selectorRank : "");
    }

    private static JsonNode draft(JsonNode c, JsonNode d, String field) {
        JsonNode v = d.get(field);
        return v != null && !v.isNull() ? v : c.get(field);
    }

    private static int requiredDraftInt(JsonNode c, JsonNode d, String field) {
        JsonNode v = draft(c, d, field);
        if (v == null || !exactInt(v)) {
            throw new ModelLoadException("field 'dflash_config." + field + "' is required for a DFlash2 head (an integer), found " + v);
        }
        return v.intValue();
    }

    private static int requiredInt(JsonNode c, String field) {
        JsonNode v = c.get(field);
        if (v == null || !exactInt(v)) {
            throw new ModelLoadException("field '" + field + "' is required (an integer), found " + v);
        }
        return v.intValue();
    }

    private static int positiveInt(JsonNode c, String field) {
        int v = requiredInt(c, field);
        if (v <= 0) {
            throw new ModelLoadException("field '" + field + "' must be a positive integer, found " + v);
        }
        return v;
    }

    /** An integer as written, in int range (asInt would read 2.7 as 2 and 2^33 as 0). */
    private static boolean exactInt(JsonNode v) {
        return v.isIntegralNumber() && v.canConvertToInt();
    }

    private static double number(JsonNode v, String field, double dflt) {
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw new ModelLoadException("field '" + field + "' must be a number, found " + v);
        }
        return v.asDouble();
    }

}

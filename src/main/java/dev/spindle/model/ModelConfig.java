package dev.spindle.model;

import java.util.List;

/**
 * A validated model shape: what config.json says, reduced to what the forward pass
 * needs. Build it with {@link ConfigParser}.
 *
 * @param numLoops          how many times the layer stack runs (1 for stock llama)
 * @param skipLoopFinalNorm true: the final norm runs once after all loops; false: after every loop
 */
public record ModelConfig(
        Family family,
        String architecture,
        int vocabSize,
        int hiddenSize,
        int intermediateSize,
        int numLayers,
        int numHeads,
        int numKvHeads,
        int headDim,
        int maxPositions,
        float rmsNormEps,
        double ropeTheta,
        boolean tiedEmbeddings,
        int numLoops,
        boolean skipLoopFinalNorm,
        int bosTokenId,
        List<Integer> eosTokenIds) {

    /**
     * The most layers a config may name: far past any published model (the 33B has 52); a larger count is a corrupt
     * config, refused before the weight layout or the draft head's per-layer arrays are sized by it.
     */
    public static final int MAX_LAYERS = 4096;

    public ModelConfig {
        eosTokenIds = List.copyOf(eosTokenIds);
        requirePositive("vocab_size", vocabSize);
        requirePositive("hidden_size", hiddenSize);
        requirePositive("intermediate_size", intermediateSize);
        requirePositive("num_hidden_layers", numLayers);
        requirePositive("num_attention_heads", numHeads);
        requirePositive("num_key_value_heads", numKvHeads);
        requirePositive("head_dim", headDim);
        requirePositive("max_position_embeddings", maxPositions);
        requirePositive("num_loops", numLoops);
        if ((long) numLayers * numLoops > MAX_LAYERS) {
            throw new ModelLoadException("config: num_hidden_layers = " + numLayers + (numLoops > 1 ? " run " + numLoops + " times" : "")
                    + " is past " + MAX_LAYERS + " executed layers (a corrupt config?)");
        }
        if (numHeads % numKvHeads != 0) {
            throw new ModelLoadException("config: num_key_value_heads = " + numKvHeads + " must divide num_attention_heads = " + numHeads);
        }
        if (headDim % 2 != 0) {
            throw new ModelLoadException("config: head_dim = " + headDim + " must be even for rotary embeddings");
        }
        if (!(rmsNormEps > 0) || !(ropeTheta > 0)) {
            throw new ModelLoadException("config: rms_norm_eps and rope_theta must be positive, found " + rmsNormEps + " and " + ropeTheta);
        }
        if (family == Family.LLAMA && numLoops != 1) {
            throw new ModelLoadException("config: num_loops = " + numLoops + " needs the looped family (NanbeigeForCausalLM)");
        }
    }

    private static void requirePositive(String field, int v) {
        if (v <= 0) {
            throw new ModelLoadException("config: field '" + field + "' must be a positive integer, found " + v);
        }
    }

    /** Layers executed per token: KV slots per token (layer + loop x L). */
    public int executedLayers() {
        return numLayers * numLoops;
    }

    public int qDim() {
        return numHeads * headDim;
    }

    public int kvDim() {
        return numKvHeads * headDim;
    }

    /** Parameters, counting a tied head once. */
    public long parameterCount() {
        return (long) vocabSize * hiddenSize * (tiedEmbeddings ? 1 : 2) + numLayers * layerParameters() + hiddenSize;
    }

    private long layerParameters() {
        long h = hiddenSize;
        return 2 * h + h * qDim() + 2 * h * kvDim() + (long) qDim() * h + 3 * h * intermediateSize;
    }

    /**
     * bf16 bytes of weights one decode step streams: every executed layer (a looped
     * model reads its layers once per loop), the final norm and the head; not the
     * embedding table, of which one row is read.
     */
    public long decodeWeightBytes() {
        return 2 * ((long) executedLayers() * layerParameters() + hiddenSize + (long) vocabSize * hiddenSize);
    }

    /** Matrix FLOPs per token, excluding attention over the context: 2 x executed weights. */
    public long flopsPerToken() {
        return 2 * ((long) executedLayers() * layerParameters() + (long) vocabSize * hiddenSize);
    }
}

package dev.spindle.model;

import java.util.List;

/** All bf16 weights of a llama-family model, bound to their roles. */
public record ModelWeights(
        Tensor embedding,          // (V, H)
        List<LayerWeights> layers, // L physical layers
        Tensor finalNorm,          // (H)
        Tensor lmHead) {           // (V, H); the embedding itself when tied
    public ModelWeights {
        layers = List.copyOf(layers);
    }
}

package dev.spindle.model;

import java.util.List;

/** All weights of a llama-family model, bound to their roles. */
public record ModelWeights(
        Tensor embedding,          // (V, H) bf16
        List<LayerWeights> layers, // L physical layers
        Tensor finalNorm,          // (H) bf16
        Matrix lmHead) {           // (V, H); the embedding itself when tied ({@link #headIsEmbedding})
    public ModelWeights {
        layers = List.copyOf(layers);
    }

    /** Whether the head is the embedding's own memory (tied embeddings). */
    public boolean headIsEmbedding() {
        return lmHead instanceof Bf16Matrix b && b.data() == embedding;
    }
}

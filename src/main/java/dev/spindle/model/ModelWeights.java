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

    /**
     * Bytes a decode step reads of these weights in their formats: each layer's norms and linear layers (every part: codes,
     * scales) once per executed layer ({@code loops} times), the final norm and the head; one row of the embedding is not
     * counted. For bf16 weights, {@link ModelConfig#decodeWeightBytes()}.
     */
    public long decodeBytes(int loops) {
        long layers = 0;
        for (LayerWeights l : this.layers) {
            layers += l.inputNorm().data().byteSize() + l.postAttnNorm().data().byteSize();
            for (Matrix m : List.of(l.q(), l.k(), l.v(), l.o(), l.gate(), l.up(), l.down())) {
                layers += m.bytes();
            }
        }
        return loops * layers + finalNorm.data().byteSize() + lmHead.bytes();
    }

    /** Whether the head is the embedding's own memory (tied embeddings). */
    public boolean headIsEmbedding() {
        return lmHead instanceof Bf16Matrix b && b.data() == embedding;
    }
}

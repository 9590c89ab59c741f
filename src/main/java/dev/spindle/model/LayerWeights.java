package dev.spindle.model;

/**
 * One decoder layer's weights, shapes as in the HF checkpoint ([out, in], row-major): the norms bf16
 * vectors, the linear layers {@link Matrix matrices} in the checkpoint's format.
 * H = hidden, Q = heads x head_dim, K = kv_heads x head_dim, I = intermediate.
 */
public record LayerWeights(
        Tensor inputNorm,      // (H)
        Matrix q,              // (Q, H)
        Matrix k,              // (K, H)
        Matrix v,              // (K, H)
        Matrix o,              // (H, Q)
        Tensor postAttnNorm,   // (H)
        Matrix gate,           // (I, H)
        Matrix up,             // (I, H)
        Matrix down) {         // (H, I)
}

package dev.spindle.model;

/**
 * One decoder layer's bf16 weights, shapes as in the HF checkpoint ([out, in], row-major).
 * H = hidden, Q = heads x head_dim, K = kv_heads x head_dim, I = intermediate.
 */
public record LayerWeights(
        Tensor inputNorm,      // (H)
        Tensor q,              // (Q, H)
        Tensor k,              // (K, H)
        Tensor v,              // (K, H)
        Tensor o,              // (H, Q)
        Tensor postAttnNorm,   // (H)
        Tensor gate,           // (I, H)
        Tensor up,             // (I, H)
        Tensor down) {         // (H, I)
}

package dev.spindle.backend;

/**
 * The operations of a llama decoder step, as one backend runs them over the rows of one step
 * (every window's rows together). {@link DecoderProgram} calls them in the model's order; a
 * backend decides how each is computed: launched now (CPU), recorded for a captured graph
 * (CUDA), fused with its neighbour (a residual add with the norm after it, a GEMM with the
 * elementwise work after it), split across tensor-parallel ranks. Every backend rounds at the
 * same points: each op's output is bf16, accumulations are fp32.
 *
 * <p>Names of the step's activations, all (rows, width): {@code x} the residual stream (hidden),
 * {@code xn} a norm's output (hidden), {@code q|k|v} (q dim + 2 kv dim), {@code att} attention's
 * output (q dim), {@code branch} a sublayer's output (hidden), {@code act} SwiGLU's output
 * (intermediate).
 */
public interface DecoderOps {
    /** x = embed_tokens[token] for every row. */
    void embed();

    /** xn = rms_norm(x) * input_layernorm of {@code layer}. */
    void inputNorm(int layer);

    /**
     * q|k|v = xn · W_qkv of {@code layer}; q and k rotated at each row's position; each row's k and v written to its KV
     * slot of executed layer {@code executed} (0-based, layer + loop x numLayers).
     */
    void qkvRopeKvWrite(int layer, int executed);

    /** att = softmax(q · K^T / sqrt(head dim)) · V, causal, each window over its own blocks of executed layer {@code executed}. */
    void attention(int executed);

    /** branch = att · W_o of {@code layer}; summed over the tensor-parallel ranks where there are several. */
    void outProj(int layer);

    /** x = x + branch. */
    void addResidual();

    /** xn = rms_norm(x) * post_attention_layernorm of {@code layer}. */
    void postAttentionNorm(int layer);

    /** act = silu(xn · W_gate) * (xn · W_up) of {@code layer}. */
    void gateUpSwiglu(int layer);

    /** branch = act · W_down of {@code layer}; summed over the tensor-parallel ranks where there are several. */
    void downProj(int layer);

    /** The residual stream x of every tapped window's rows copied out as tap {@code index} of the step. */
    void tap(int index);

    /** x = rms_norm(x) * norm (the model's final norm). */
    void finalNorm();
}

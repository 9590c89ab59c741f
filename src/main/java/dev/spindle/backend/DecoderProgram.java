package dev.spindle.backend;

import dev.spindle.model.ModelConfig;

/**
 * The llama decoder, written once for every backend: embed; per layer (pre-norm)
 * {@code x += o(attn(rope(q(n1)), rope(k(n1)), v(n1)))} with {@code n1 = rms(x)}, then
 * {@code x += down(silu(gate(n2)) * up(n2))} with {@code n2 = rms(x)}; the final norm. The looped
 * family (Nanbeige4.2) runs the layers {@code numLoops} times, each executed layer with a KV slot of
 * its own, and the final norm after every loop unless {@code skip_loop_final_norm} (then after the
 * last only). The head (logits of the wanted rows) is the backend's, after this.
 */
public final class DecoderProgram {
    private DecoderProgram() {
    }

    /**
     * Runs the decoder over a step's rows through {@code ops}.
     *
     * @param taps executed layers after which the residual stream is copied out ({@link DecoderOps#tap}), in tap order
     */
    public static void run(ModelConfig c, int[] taps, DecoderOps ops) {
        ops.embed();
        for (int loop = 0; loop < c.numLoops(); loop++) {
            for (int layer = 0; layer < c.numLayers(); layer++) {
                int executed = layer + loop * c.numLayers();
                ops.inputNorm(layer);
                ops.qkvRopeKvWrite(layer, executed);
                ops.attention(executed);
                ops.outProj(layer);
                ops.addResidual();
                ops.postAttentionNorm(layer);
                ops.gateUpSwiglu(layer);
                ops.downProj(layer);
                ops.addResidual();
                for (int t = 0; t < taps.length; t++) {
                    if (taps[t] == executed) {
                        ops.tap(t);
                    }
                }
            }
            if (!c.skipLoopFinalNorm() || loop == c.numLoops() - 1) {
                ops.finalNorm();
            }
        }
    }
}

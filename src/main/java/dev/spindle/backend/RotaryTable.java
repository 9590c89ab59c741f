package dev.spindle.backend;

import dev.spindle.model.Bf16;

/**
 * RoPE cos/sin as HF's default rotary embedding computes them: fp32
 * {@code inv_freq[i] = 1 / theta^(2i/d)}, fp32 angle {@code pos * inv_freq[i]},
 * fp32 cos/sin rounded to bf16. Rows are computed per position on demand.
 */
public final class RotaryTable {
    private final float[] invFreq;

    public RotaryTable(int headDim, double theta) {
        invFreq = new float[headDim / 2];
        float base = (float) theta;
        for (int i = 0; i < invFreq.length; i++) {
            float exponent = (float) (2 * i) / (float) headDim;
            invFreq[i] = 1f / (float) StrictMath.pow(base, exponent);
        }
    }

    /** Fills (n, headDim/2) cos and sin rows for positions start..start+n-1. */
    public void fill(int start, int n, float[] cos, float[] sin) {
        int half = invFreq.length;
        for (int r = 0; r < n; r++) {
            float pos = start + r;
            for (int i = 0; i < half; i++) {
                float angle = pos * invFreq[i];
                cos[r * half + i] = Bf16.round((float) StrictMath.cos(angle));
                sin[r * half + i] = Bf16.round((float) StrictMath.sin(angle));
            }
        }
    }
}

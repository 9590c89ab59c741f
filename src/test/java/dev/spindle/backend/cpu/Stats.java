package dev.spindle.backend.cpu;

import dev.spindle.eval.Divergence;

/** Distribution comparisons for parity tests. */
public final class Stats {
    private Stats() {
    }

    static double[] logSoftmax(float[] logits) {
        return Divergence.logSoftmax(logits);
    }

    /** KL(p || q) in nats, p and q given as logits. */
    public static double kl(float[] p, float[] q) {
        double[] lp = logSoftmax(p);
        double[] lq = logSoftmax(q);
        double kl = 0;
        for (int i = 0; i < lp.length; i++) {
            kl += Math.exp(lp[i]) * (lp[i] - lq[i]);
        }
        return kl;
    }

    /** Index of the largest logit, the first among equals (as torch.argmax). */
    static int argmax(float[] logits) {
        return Divergence.argmax(logits);
    }
}

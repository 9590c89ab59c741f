package dev.spindle.backend.cpu;

/** Distribution comparisons for parity tests. */
public final class Stats {
    private Stats() {
    }

    static double[] logSoftmax(float[] logits) {
        double max = Double.NEGATIVE_INFINITY;
        for (float f : logits) {
            max = Math.max(max, f);
        }
        double sum = 0;
        for (float f : logits) {
            sum += Math.exp(f - max);
        }
        double lse = max + Math.log(sum);
        double[] out = new double[logits.length];
        for (int i = 0; i < logits.length; i++) {
            out[i] = logits[i] - lse;
        }
        return out;
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
        int best = 0;
        for (int i = 1; i < logits.length; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        return best;
    }
}

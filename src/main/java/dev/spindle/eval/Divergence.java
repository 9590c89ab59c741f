package dev.spindle.eval;

/** Distances between two next-token distributions given as logits over the whole vocabulary, in double. */
public final class Divergence {
    private Divergence() {
    }

    /** log softmax of {@code logits}, in double. */
    public static double[] logSoftmax(float[] logits) {
        double max = Double.NEGATIVE_INFINITY;
        for (float z : logits) {
            max = Math.max(max, z);
        }
        double sum = 0;
        for (float z : logits) {
            sum += Math.exp(z - max);
        }
        double lse = max + Math.log(sum);
        double[] out = new double[logits.length];
        for (int i = 0; i < logits.length; i++) {
            out[i] = logits[i] - lse;
        }
        return out;
    }

    /** KL(p ‖ q) = Σ p (log p − log q), p and q the softmax of the two logit rows; 0 where p is 0. */
    public static double kl(float[] p, float[] q) {
        if (p.length != q.length) {
            throw new IllegalArgumentException("logit rows of " + p.length + " and " + q.length + " entries");
        }
        return kl(logSoftmax(p), logSoftmax(q));
    }

    /** KL(p ‖ q) from the two distributions' log-probabilities ({@link #logSoftmax}). */
    public static double kl(double[] lp, double[] lq) {
        double kl = 0;
        for (int i = 0; i < lp.length; i++) {
            double pi = Math.exp(lp[i]);
            if (pi > 0) {
                kl += pi * (lp[i] - lq[i]);
            }
        }
        return Math.max(0, kl);
    }

    /** The first index of the largest logit. */
    public static int argmax(float[] z) {
        int best = 0;
        for (int i = 1; i < z.length; i++) {
            if (z[i] > z[best]) {
                best = i;
            }
        }
        return best;
    }
}

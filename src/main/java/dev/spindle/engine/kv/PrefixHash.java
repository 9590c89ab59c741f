package dev.spindle.engine.kv;

/**
 * The chained hash that keys a full KV block: it covers the block's tokens and, through
 * the parent hash, every token before them, so equal hashes mean equal prefixes (and
 * therefore equal K/V, positions being fixed by the block index).
 */
public final class PrefixHash {
    public static final long ROOT = 0x5EED_CAFE_F00DL;

    private PrefixHash() {
    }

    public static long of(long parent, int[] tokens, int from, int to) {
        long h = parent ^ 0x9E3779B97F4A7C15L;
        for (int i = from; i < to; i++) {
            h = mix(h ^ (tokens[i] * 0xC2B2AE3D27D4EB4FL + i - from));
        }
        return mix(h ^ (to - from));
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xFF51AFD7ED558CCDL;
        z = (z ^ (z >>> 33)) * 0xC4CEB9FE1A85EC53L;
        return z ^ (z >>> 33);
    }
}

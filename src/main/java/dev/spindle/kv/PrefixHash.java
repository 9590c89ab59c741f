package dev.spindle.kv;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;

/**
 * The chained hash that keys a full KV block in the prefix cache: it covers the block's tokens and, through the
 * parent hash, every token before them (positions are fixed by the block index). It is SHA-256 under a secret key
 * drawn at start, cut to 64 bits: a client that knows the function cannot compute another request's hashes, so it
 * cannot craft a prompt whose blocks are found under them (vLLM's CVE-2025-25183 was such a collision, through a
 * predictable hash). {@link BlockPool#lookup} still checks a hit's own tokens and parent hash, so a chance collision
 * of 64 bits needs equal tokens too. One engine thread uses an instance (the digest is not shared).
 */
public final class PrefixHash {
    /** The parent hash of a sequence's first block. */
    public static final long ROOT = 0;
    static final int KEY_BYTES = 32;

    private final byte[] key;
    private final MessageDigest sha;
    private ByteBuffer input = ByteBuffer.allocate(KEY_BYTES + 8 + 4 + 16 * 4);

    /** Under {@code key} (32 bytes): tests fix it, a server draws it ({@link #random}). */
    public PrefixHash(byte[] key) {
        if (key.length != KEY_BYTES) {
            throw new IllegalArgumentException("a prefix hash key has " + KEY_BYTES + " bytes, not " + key.length);
        }
        this.key = key.clone();
        try {
            this.sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }

    /** Under a key drawn from the platform's strong random source. */
    public static PrefixHash random() {
        byte[] key = new byte[KEY_BYTES];
        new SecureRandom().nextBytes(key);
        return new PrefixHash(key);
    }

    /** The hash of block {@code tokens[from, to)} after the prefix whose hash is {@code parent}. */
    public long of(long parent, int[] tokens, int from, int to) {
        int bytes = KEY_BYTES + 8 + 4 + (to - from) * 4;
        if (input.capacity() < bytes) {
            input = ByteBuffer.allocate(bytes);
        }
        input.clear();
        input.put(key).putLong(parent).putInt(to - from);
        for (int i = from; i < to; i++) {
            input.putInt(tokens[i]);
        }
        sha.update(input.array(), 0, input.position());
        return ByteBuffer.wrap(sha.digest()).getLong();
    }
}

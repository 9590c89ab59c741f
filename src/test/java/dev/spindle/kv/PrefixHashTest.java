package dev.spindle.kv;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class PrefixHashTest {
    static byte[] key(int b) {
        byte[] k = new byte[PrefixHash.KEY_BYTES];
        java.util.Arrays.fill(k, (byte) b);
        return k;
    }

    @Test
    void aBlockHashCoversItsKeyParentTokensAndLength() {
        PrefixHash h = new PrefixHash(key(1));
        int[] t = {5, 9, 2, 7, 5, 9};
        long base = h.of(PrefixHash.ROOT, t, 0, 2);
        assertEquals(base, new PrefixHash(key(1)).of(PrefixHash.ROOT, new int[]{5, 9}, 0, 2), "a function of the key and the values");
        assertEquals(base, h.of(PrefixHash.ROOT, t, 4, 6), "not of where the block sits in the array");
        Set<Long> others = new HashSet<>(java.util.List.of(
                new PrefixHash(key(2)).of(PrefixHash.ROOT, t, 0, 2),
                h.of(base, t, 0, 2),
                h.of(PrefixHash.ROOT, new int[]{9, 5}, 0, 2),
                h.of(PrefixHash.ROOT, t, 0, 3),
                h.of(PrefixHash.ROOT, t, 0, 1)));
        assertEquals(5, others.size());
        assertEquals(false, others.contains(base));
        // blocks longer than the first buffer
        int[] long_ = new int[100];
        assertNotEquals(h.of(PrefixHash.ROOT, long_, 0, 100), h.of(PrefixHash.ROOT, long_, 0, 99));
    }

    @Test
    void engineKeysDiffer() {
        int[] t = {1, 2, 3, 4};
        assertNotEquals(PrefixHash.random().of(PrefixHash.ROOT, t, 0, 4), PrefixHash.random().of(PrefixHash.ROOT, t, 0, 4));
        assertThrows(IllegalArgumentException.class, () -> new PrefixHash(new byte[16]));
    }
}

package dev.spindle.backend;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The split rule the attention kernels and the CPU twin share: splits tile the keys, aligned, whole tiles, 1/64 of their octave. */
class KeySplitsTest {
    @Test
    void aKeyLiesInItsSplit() {
        // between's small draws spread keys over every octave, the flat part below 16K among them
        Trials.forAll(1000, r -> Trials.between(r, 0, (1 << 30) - 1), KeySplitsTest::aKeyLiesInItsSplit);
    }

    static void aKeyLiesInItsSplit(int key) {
        int s = KeySplits.of(key);
        assertTrue(KeySplits.start(s) <= key && key < KeySplits.start(s + 1), key + " in split " + s);
        assertEquals(KeySplits.size(key), KeySplits.start(s + 1) - KeySplits.start(s));
    }

    @Test
    void splitsAreWholeTilesAlignedToTheirSize() {
        // all 1,215 splits: about a sampled run's 1,000 tries, and none left out
        for (int split = 0; split <= 1214; split++) {
            splitsAreWholeTilesAlignedToTheirSize(split);
        }
    }

    static void splitsAreWholeTilesAlignedToTheirSize(int split) {
        int a = KeySplits.start(split), b = KeySplits.start(split + 1), size = b - a;
        assertEquals(1, Integer.bitCount(size), "a power of two");
        assertTrue(size >= KeySplits.MIN && size % 64 == 0, "whole 64-key tiles (the kernels' KT)");
        assertEquals(0, a % size, "aligned to its size");
        assertEquals(split, KeySplits.of(a));
        assertEquals(split, KeySplits.of(b - 1));
        // at least 1/128 and at most 1/64 of the keys before it (past the flat part)
        assertTrue(a < KeySplits.FLAT || (size * 64L <= a && size * 128L > a), "split " + split + " of " + size + " at " + a);
    }

    @Test
    void shortRowsKeep128KeySplitsAndLongRowsGetFewer() {
        for (int keys = 1; keys <= KeySplits.FLAT; keys++) {
            assertEquals((keys - 1) / 128 + 1, KeySplits.count(keys), "the 128-key splits below 16K");
        }
        assertEquals(0, KeySplits.count(0));
        assertEquals(192, KeySplits.count(32 * 1024));
        assertEquals(320, KeySplits.count(128 * 1024));
        assertEquals(448, KeySplits.count(512 * 1024));
        assertEquals(256, KeySplits.size(16 * 1024));
        assertEquals(4096, KeySplits.size(512 * 1024 - 1));
        assertEquals(1 << 20, KeySplits.start(KeySplits.count(1 << 20)), "a power of two of keys is a split boundary");
        assertThrows(IllegalArgumentException.class, () -> KeySplits.start(128 + 17 * 64));
    }
}

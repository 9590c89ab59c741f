package dev.spindle.kv;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class BlockPoolTest {
    @Test
    void tablesReserveShareAndRelease() {
        BlockPool pool = new BlockPool(6, 4);
        BlockTable a = new BlockTable(pool);
        a.reserve(9); // 3 blocks
        assertEquals(3, a.numBlocks());
        assertEquals(3, pool.freeBlocks());
        a.advance(9);
        BlockTable b = new BlockTable(pool);
        b.shareFullBlocks(a, 2);
        assertEquals(8, b.tokens());
        assertEquals(2, pool.refCount(a.block(0)));
        a.release();
        assertEquals(4, pool.freeBlocks(), "shared blocks stay held by b");
        b.reserve(12);
        assertEquals(3, pool.freeBlocks());
        b.release();
        assertEquals(6, pool.freeBlocks());
    }

    @Test
    void exhaustionIsAClearError() {
        BlockPool pool = new BlockPool(2, 4);
        BlockTable a = new BlockTable(pool);
        KvCapacityException e = assertThrows(KvCapacityException.class, () -> a.reserve(9));
        assertEquals("KV pool exhausted: all 2 blocks of 4 tokens are in use", e.getMessage());
    }

    @Test
    void misuseIsRefused() {
        BlockPool pool = new BlockPool(2, 4);
        int id = pool.allocate();
        pool.release(id);
        assertThrows(IllegalStateException.class, () -> pool.release(id));
        BlockTable t = new BlockTable(pool);
        t.reserve(4);
        assertThrows(IllegalArgumentException.class, () -> t.advance(5));
    }

    @Test
    void findSeesWhatALookupWouldTakeWithoutTakingIt() {
        BlockPool pool = new BlockPool(4, 2);
        int id = cachedUnheld(pool);
        assertEquals(4, pool.freeBlocks(), "a cached block nobody holds can be taken");
        assertEquals(id, pool.find(42, PrefixHash.ROOT, new int[]{3, 4}, 0));
        assertEquals(-1, pool.find(42, PrefixHash.ROOT, new int[]{3, 5}, 0), "other tokens under the same hash");
        assertEquals(0, pool.refCount(id));
        assertEquals(4, pool.freeBlocks(), "found, not taken");
        assertEquals(id, pool.lookup(42, PrefixHash.ROOT, new int[]{3, 4}, 0));
        assertEquals(1, pool.refCount(id));
        assertEquals(3, pool.freeBlocks(), "looked up: held");
    }

    @Test
    void aHashCollisionIsAMissNotAnotherPrefix() {
        BlockPool pool = new BlockPool(4, 2);
        int id = cachedUnheld(pool);
        assertEquals(-1, pool.lookup(42, PrefixHash.ROOT, new int[]{3, 5}, 0), "other tokens under the same hash");
        assertEquals(-1, pool.lookup(42, 17, new int[]{3, 4}, 0), "the same tokens after another prefix");
        assertEquals(1, pool.cachedBlocks());
        assertEquals(id, pool.lookup(42, PrefixHash.ROOT, new int[]{9, 3, 4}, 1));
        assertEquals(1, pool.refCount(id));
    }

    /** A block of tokens {3, 4} cached under hash 42 after the root, held by nobody. */
    private static int cachedUnheld(BlockPool pool) {
        int id = pool.allocate();
        pool.cache(id, 42, PrefixHash.ROOT, new int[]{3, 4}, 0);
        pool.release(id);
        return id;
    }
}

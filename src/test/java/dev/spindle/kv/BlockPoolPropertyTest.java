package dev.spindle.kv;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The block pool against a plain model of its rules, over any sequence of allocations, retains, releases,
 * registrations and lookups: a held block is never handed out again; an allocation takes a never-cached free block
 * while there is one, else evicts the cached block released longest ago; a lookup finds a block only under its hash
 * with the same parent hash and tokens (hashes are drawn from four values, so collisions are common); the counts agree.
 */
class BlockPoolPropertyTest {
    static final int BLOCKS = 6, BLOCK_SIZE = 2;

    record Cached(long hash, long parent, int[] tokens) {
    }

    /** Up to 120 operations, each an int whose remainder by 5 picks the kind and whose quotient's bits its arguments. */
    static List<Integer> operations(RandomGenerator r) {
        return Trials.listOf(r, 0, 120, g -> Trials.between(g, 0, Integer.MAX_VALUE));
    }

    @Test
    void poolFollowsItsRules() {
        Trials.forAll(1500, BlockPoolPropertyTest::operations, BlockPoolPropertyTest::poolFollowsItsRules);
    }

    static void poolFollowsItsRules(List<Integer> ops) {
        BlockPool pool = new BlockPool(BLOCKS, BLOCK_SIZE);
        Map<Integer, Integer> refs = new TreeMap<>();          // held blocks
        Map<Integer, Cached> cached = new HashMap<>();          // registered blocks by id
        Map<Long, Integer> byHash = new HashMap<>();
        LinkedHashSet<Integer> released = new LinkedHashSet<>(); // cached, unreferenced; released longest ago first
        for (int op : ops) {
            int kind = op % 5, arg = op / 5;
            List<Integer> held = new ArrayList<>(refs.keySet());
            switch (kind) {
                case 0 -> {
                    if (refs.size() == BLOCKS) {
                        assertThrows(KvCapacityException.class, pool::allocate);
                        break;
                    }
                    boolean freeExists = refs.size() + released.size() < BLOCKS;
                    int id = pool.allocate();
                    assertTrue(!refs.containsKey(id), "block " + id + " is held and was handed out again");
                    if (freeExists) {
                        assertTrue(!cached.containsKey(id), "a cached block was evicted while a free one was left");
                    } else {
                        assertEquals(released.iterator().next(), id, "evicts the cached block released longest ago");
                        released.remove(id);
                        byHash.remove(cached.remove(id).hash());
                    }
                    refs.put(id, 1);
                }
                case 1, 2 -> {
                    if (held.isEmpty()) {
                        break;
                    }
                    int id = held.get(arg % held.size());
                    if (kind == 1) {
                        pool.retain(id);
                        refs.merge(id, 1, Integer::sum);
                    } else {
                        pool.release(id);
                        if (refs.merge(id, -1, Integer::sum) == 0) {
                            refs.remove(id);
                            if (cached.containsKey(id)) {
                                released.add(id);
                            }
                        }
                    }
                }
                case 3 -> {
                    if (held.isEmpty()) {
                        break;
                    }
                    int id = held.get(arg % held.size());
                    long hash = (arg >> 3) & 3, parent = (arg >> 5) & 1;
                    int[] tokens = {(arg >> 6) & 1, (arg >> 7) & 1};
                    pool.cache(id, hash, parent, tokens, 0);
                    if (!cached.containsKey(id) && !byHash.containsKey(hash)) {
                        cached.put(id, new Cached(hash, parent, tokens));
                        byHash.put(hash, id);
                    }
                }
                default -> {
                    long hash = arg & 3, parent = (arg >> 2) & 1;
                    int[] query = {7, (arg >> 3) & 1, (arg >> 4) & 1}; // the block at offset 1
                    Integer id = byHash.get(hash);
                    boolean hit = id != null && cached.get(id).parent() == parent
                            && Arrays.equals(cached.get(id).tokens(), Arrays.copyOfRange(query, 1, 3));
                    assertEquals(hit ? id : -1, pool.lookup(hash, parent, query, 1), "lookup " + hash + " " + parent + " " + Arrays.toString(query));
                    if (hit) {
                        refs.merge(id, 1, Integer::sum);
                        released.remove(id);
                    }
                }
            }
            assertEquals(BLOCKS - refs.size(), pool.freeBlocks());
            assertEquals(BLOCKS - refs.size() - released.size(), pool.unheldBlocks());
            assertEquals(byHash.size(), pool.cachedBlocks());
            for (int id = 0; id < BLOCKS; id++) {
                assertEquals(refs.getOrDefault(id, 0), pool.refCount(id), "block " + id);
            }
        }
    }
}

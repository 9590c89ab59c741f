package dev.spindle.kv;

import dev.spindle.step.KvCapacity;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;

/**
 * KV block ids with reference counts, a free list and a prefix cache. It owns no
 * memory: a backend's KV store holds the bytes of block {@code id}.
 *
 * <p>A full block may be registered under the hash of its tokens (chained with its
 * predecessors', {@link PrefixHash}), with those tokens and its parent's hash; when its
 * last reference goes, it stays cached, in least-recently-released order, until a fresh
 * block is needed and none is free. Looking a hash up revives the block, if its tokens and
 * parent hash are the ones asked for (a hash collision is a miss, never another prefix's K/V).
 */
public final class BlockPool {
    private final int blockSize;
    private final int[] refs;
    private final long[] hashOf;
    private final boolean[] hashed;
    private final long[] parentOf;  // a cached block's parent hash
    private final int[] tokensOf;   // (numBlocks, blockSize): a cached block's tokens
    private final ArrayDeque<Integer> free = new ArrayDeque<>();
    private final LinkedHashSet<Integer> evictable = new LinkedHashSet<>(); // cached, unreferenced; oldest first
    private final Map<Long, Integer> byHash = new HashMap<>();

    /** @param blockSize tokens per block */
    /** A pool over a backend's blocks: one per backend, owned by whoever drives it. */
    public BlockPool(KvCapacity capacity) {
        this(capacity.blocks(), capacity.blockSize());
    }

    public BlockPool(int numBlocks, int blockSize) {
        if (numBlocks <= 0 || blockSize <= 0) {
            throw new IllegalArgumentException("numBlocks and blockSize must be positive: " + numBlocks + ", " + blockSize);
        }
        this.blockSize = blockSize;
        this.refs = new int[numBlocks];
        this.hashOf = new long[numBlocks];
        this.hashed = new boolean[numBlocks];
        this.parentOf = new long[numBlocks];
        this.tokensOf = new int[Math.multiplyExact(numBlocks, blockSize)];
        for (int i = 0; i < numBlocks; i++) {
            free.add(i);
        }
    }

    public int blockSize() {
        return blockSize;
    }

    public int numBlocks() {
        return refs.length;
    }

    /** Blocks an allocation can take now: free ones and cached unreferenced ones. */
    public int freeBlocks() {
        return free.size() + evictable.size();
    }

    /** Blocks an allocation can take without evicting a cached prefix. */
    public int unheldBlocks() {
        return free.size();
    }

    /** Blocks holding cached prefixes (referenced or not). */
    public int cachedBlocks() {
        return byHash.size();
    }

    /** A block with one reference: a free one, else the least recently released cached one. */
    public int allocate() {
        Integer id = free.poll();
        if (id == null && !evictable.isEmpty()) {
            id = evictable.iterator().next();
            evictable.remove(id);
            byHash.remove(hashOf[id]);
            hashed[id] = false;
        }
        if (id == null) {
            throw new KvCapacityException("KV pool exhausted: all " + refs.length + " blocks of " + blockSize + " tokens are in use");
        }
        refs[id] = 1;
        return id;
    }

    public void retain(int id) {
        if (refs[id] <= 0) {
            throw new IllegalStateException("block " + id + " is free");
        }
        refs[id]++;
    }

    public void release(int id) {
        if (refs[id] <= 0) {
            throw new IllegalStateException("block " + id + " released more often than held");
        }
        if (--refs[id] == 0) {
            if (hashed[id]) {
                evictable.add(id);
            } else {
                free.add(id);
            }
        }
    }

    public int refCount(int id) {
        return refs[id];
    }

    /**
     * Registers a full, written block under its chained hash (first registration wins).
     *
     * @param hash   {@link PrefixHash#of} its tokens after {@code parent}
     * @param parent the hash of the prefix before it ({@link PrefixHash#ROOT} for a first block)
     * @param tokens its tokens are {@code tokens[from, from + blockSize)}
     */
    public void cache(int id, long hash, long parent, int[] tokens, int from) {
        if (hashed[id] || byHash.containsKey(hash)) {
            return;
        }
        hashed[id] = true;
        hashOf[id] = hash;
        parentOf[id] = parent;
        System.arraycopy(tokens, from, tokensOf, id * blockSize, blockSize);
        byHash.put(hash, id);
    }

    /** As {@link #lookup}, without taking a reference: what a lookup would find now. */
    public int find(long hash, long parent, int[] tokens, int from) {
        Integer id = byHash.get(hash);
        if (id == null || parentOf[id] != parent
                || !java.util.Arrays.equals(tokensOf, id * blockSize, (id + 1) * blockSize, tokens, from, from + blockSize)) {
            return -1;
        }
        return id;
    }

    /**
     * The cached block for {@code hash}, with a reference taken, or -1: also where the block under {@code hash} holds
     * other tokens or follows another parent (a collision).
     */
    public int lookup(long hash, long parent, int[] tokens, int from) {
        int id = find(hash, parent, tokens, from);
        if (id < 0) {
            return -1;
        }
        if (refs[id] == 0) {
            evictable.remove(id);
        }
        refs[id]++;
        return id;
    }
}

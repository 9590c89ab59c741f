package dev.spindle.engine.kv;

import java.util.ArrayDeque;

/**
 * KV block ids with reference counts and a free list. It owns no memory: a backend's
 * KV store holds the bytes of block {@code id}. A block returns to the free list when
 * its last reference is released.
 */
public final class BlockPool {
    private final int blockSize;
    private final int[] refs;
    private final ArrayDeque<Integer> free = new ArrayDeque<>();

    /** @param blockSize tokens per block */
    public BlockPool(int numBlocks, int blockSize) {
        if (numBlocks <= 0 || blockSize <= 0) {
            throw new IllegalArgumentException("numBlocks and blockSize must be positive: " + numBlocks + ", " + blockSize);
        }
        this.blockSize = blockSize;
        this.refs = new int[numBlocks];
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

    public int freeBlocks() {
        return free.size();
    }

    /** A free block with one reference. */
    public int allocate() {
        Integer id = free.poll();
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
            free.add(id);
        }
    }

    public int refCount(int id) {
        return refs[id];
    }
}

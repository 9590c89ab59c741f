package dev.spindle.kv;

import dev.spindle.step.BlockIds;

import java.util.Arrays;

/**
 * One sequence's view of the KV pool: logical block i (tokens [i*B, (i+1)*B)) lives
 * in physical block {@code block(i)}. {@code tokens} counts positions whose K/V have
 * been written; a forward pass over a window starts there.
 */
public final class BlockTable implements BlockIds {
    private final BlockPool pool;
    private int[] blocks = new int[4];
    private int numBlocks;
    private int tokens;

    public BlockTable(BlockPool pool) {
        this.pool = pool;
    }

    @Override
    public int blockSize() {
        return pool.blockSize();
    }

    /** Positions [0, tokens) hold K/V. */
    public int tokens() {
        return tokens;
    }

    @Override
    public int numBlocks() {
        return numBlocks;
    }

    @Override
    public int block(int logical) {
        if (logical >= numBlocks) {
            throw new IndexOutOfBoundsException("logical block " + logical + " of " + numBlocks);
        }
        return blocks[logical];
    }

    /** Allocates blocks until positions [0, length) have room. */
    public void reserve(int length) {
        int needed = (length + pool.blockSize() - 1) / pool.blockSize();
        while (numBlocks < needed) {
            int id = pool.allocate();
            if (numBlocks == blocks.length) {
                blocks = Arrays.copyOf(blocks, blocks.length * 2);
            }
            blocks[numBlocks++] = id;
        }
    }

    /** Marks positions [tokens, length) as written (after a forward pass). */
    public void advance(int length) {
        if (length < tokens || length > numBlocks * pool.blockSize()) {
            throw new IllegalArgumentException("cannot advance from " + tokens + " to " + length + " tokens with " + numBlocks + " blocks");
        }
        tokens = length;
    }

    /**
     * Starts this (empty) table on the first {@code fullBlocks} blocks of {@code other},
     * sharing them by reference: a resumed prefix, as a prefix cache hands out.
     */
    public void shareFullBlocks(BlockTable other, int fullBlocks) {
        if (numBlocks != 0 || fullBlocks * pool.blockSize() > other.tokens) {
            throw new IllegalArgumentException("can share only full, written blocks into an empty table");
        }
        reserveArray(fullBlocks);
        for (int i = 0; i < fullBlocks; i++) {
            pool.retain(other.blocks[i]);
            blocks[numBlocks++] = other.blocks[i];
        }
        tokens = fullBlocks * pool.blockSize();
    }

    private void reserveArray(int n) {
        if (blocks.length < n) {
            blocks = Arrays.copyOf(blocks, Math.max(n, blocks.length * 2));
        }
    }

    /** Starts this (empty) table on cached full blocks (references already taken by {@link BlockPool#lookup}). */
    public void adoptCached(int[] ids) {
        if (numBlocks != 0) {
            throw new IllegalArgumentException("can adopt cached blocks only into an empty table");
        }
        reserveArray(ids.length);
        for (int id : ids) {
            blocks[numBlocks++] = id;
        }
        tokens = ids.length * pool.blockSize();
    }

    /**
     * Forgets positions [length, tokens): rejected draft tokens. Blocks past the new end are
     * released; their K/V, and any left in the last kept block, are overwritten when
     * those positions are computed again.
     */
    public void truncate(int length) {
        if (length < 0 || length > tokens) {
            throw new IllegalArgumentException("cannot truncate " + tokens + " tokens to " + length);
        }
        tokens = length;
        int keep = (length + pool.blockSize() - 1) / pool.blockSize();
        while (numBlocks > keep) {
            pool.release(blocks[--numBlocks]);
        }
    }

    /** Releases every block; the table is empty afterwards. */
    public void release() {
        for (int i = 0; i < numBlocks; i++) {
            pool.release(blocks[i]);
        }
        numBlocks = 0;
        tokens = 0;
    }
}

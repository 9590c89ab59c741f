package dev.spindle.step;

/**
 * How much KV a backend holds: {@code blocks} blocks of {@code blockSize} tokens each (all layers'
 * K and V of those tokens), stored as {@code dtype}. Whoever drives the backend (the engine, a bench)
 * hands out the blocks' ids.
 */
public record KvCapacity(int blocks, int blockSize, KvDtype dtype) {
    public KvCapacity {
        if (blocks < 1 || blockSize < 1) {
            throw new IllegalArgumentException("a KV pool needs at least one block of at least one token: " + blocks + " x " + blockSize);
        }
    }

    /** A bf16 store. */
    public KvCapacity(int blocks, int blockSize) {
        this(blocks, blockSize, KvDtype.BF16);
    }
}

package dev.spindle.step;

/**
 * A read-only view of one sequence's KV blocks, what a backend reads of a block table: logical
 * block {@code i} (positions {@code [i * blockSize, (i + 1) * blockSize)}) lives in physical block
 * {@link #block(int) block(i)} of the backend's {@link KvCapacity pool}. The engine owns the table
 * behind it and alone reserves, shares, advances and frees blocks.
 */
public interface BlockIds {
    /** Tokens a block holds. */
    int blockSize();

    /** Logical blocks reserved: positions {@code [0, numBlocks * blockSize)} have room. */
    int numBlocks();

    /** The physical block of logical block {@code logical} ({@code 0 <= logical < numBlocks}). */
    int block(int logical);
}

package dev.spindle.backend.cuda;

import java.nio.file.Path;

/**
 * Sizes of the pass: tokens per KV block, rows per step, the share of free memory the KV pool takes, an optional block cap;
 * whether decode steps replay CUDA graphs; where the pinned GEMM algorithms are cached (null: searched at every start); device
 * memory to leave for a draft model opened next (its weights and buffers, and its KV bytes per token for as many tokens as this pool).
 */
public record CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs,
                          Path gemmCache, long reserveBytes, long extraKvBytesPerToken) {
    public CudaOptions {
        if (blockSize < 1 || maxStepRows < 1 || kvMemoryFraction <= 0 || kvMemoryFraction > 1 || reserveBytes < 0 || extraKvBytesPerToken < 0) {
            throw new IllegalArgumentException("invalid CUDA options " + blockSize + ", " + maxStepRows + ", " + kvMemoryFraction + ", "
                    + reserveBytes + ", " + extraKvBytesPerToken);
        }
        if (Integer.bitCount(blockSize) != 1) {
            // the attention kernels find a key's block and offset by shift and mask
            throw new IllegalArgumentException("the CUDA backend needs a KV block size (--block-size, spindle.block-size) that is a power of two"
                    + " (1, 2, 4, ... 16, 32, ...), got " + blockSize);
        }
    }

    /** Nothing left for another model on the device. */
    public CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs, Path gemmCache) {
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, 0, 0);
    }

    /** Without a GEMM algorithm cache. */
    public CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs) {
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, null);
    }
}

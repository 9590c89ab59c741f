package dev.spindle.backend.cuda;

import dev.spindle.step.KvDtype;

import java.nio.file.Path;

/**
 * Sizes of the pass: tokens per KV block, rows per step, the share of free memory the KV pool takes, an optional block cap;
 * whether decode steps replay CUDA graphs; where the pinned GEMM algorithms are cached (null: searched at every start); device
 * memory to leave for a draft model opened next (its weights and buffers, and its KV bytes per token for as many tokens as this pool);
 * how the KV cache stores K and V (bf16, or fp8: E4M3 and a scale a head vector); which kernels run ({@link KernelSet}).
 */
public record CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs,
                          Path gemmCache, long reserveBytes, long extraKvBytesPerToken, KvDtype kvDtype, KernelSet kernels) {
    public CudaOptions {
        java.util.Objects.requireNonNull(kernels, "kernels");
        if (kvDtype != KvDtype.BF16 && kvDtype != KvDtype.FP8) {
            throw new IllegalArgumentException("--kv-cache-dtype " + kvDtype.label + ": the CUDA backend's attention kernels read bf16 and fp8 KV"
                    + " caches; q8 and q4 run on the CPU backend (--backend cpu)");
        }
        if (kvDtype == KvDtype.FP8 && blockSize < 2) {
            throw new IllegalArgumentException("--kv-cache-dtype fp8 on the CUDA backend needs a KV block size of at least 2 (its kernels copy two"
                    + " keys' scales at a time), got " + blockSize);
        }
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

    /** The full kernel set. */
    public CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs, Path gemmCache, long reserveBytes,
                       long extraKvBytesPerToken, KvDtype kvDtype) {
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, kvDtype, KernelSet.FULL);
    }

    /** A bf16 KV cache. */
    public CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs, Path gemmCache, long reserveBytes,
                       long extraKvBytesPerToken) {
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, KvDtype.BF16);
    }

    /** These options with the KV cache stored as {@code d}. */
    public CudaOptions withKvDtype(KvDtype d) {
        return new CudaOptions(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, d, kernels);
    }

    /** These options running the kernels of {@code set}. */
    public CudaOptions withKernels(KernelSet set) {
        return new CudaOptions(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, kvDtype, set);
    }

    /** Whether the KV cache is fp8 (the attention kernels' _kv8 twins). */
    public boolean kv8() {
        return kvDtype == KvDtype.FP8;
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

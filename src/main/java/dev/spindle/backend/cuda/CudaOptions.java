package dev.spindle.backend.cuda;

import dev.spindle.step.KvDtype;

import java.nio.file.Path;

/**
 * Sizes of the pass: tokens per KV block, rows per step, the share of free memory the KV pool takes, an optional block cap;
 * whether decode steps replay CUDA graphs; where the pinned GEMM algorithms are cached (null: searched at every start); device
 * memory to leave for a draft model opened next (its weights and buffers, and its KV bytes per token for as many tokens as this pool);
 * how the KV cache stores K and V (bf16, or fp8: E4M3 and a scale a head vector); which kernels run ({@link KernelSet}); the
 * device memory the process may use in all (0: the whole device), as on a card of that size.
 */
public record CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs,
                          Path gemmCache, long reserveBytes, long extraKvBytesPerToken, KvDtype kvDtype, KernelSet kernels, long memoryLimit) {
    public CudaOptions {
        java.util.Objects.requireNonNull(kernels, "kernels");
        if (memoryLimit < 0) {
            throw new IllegalArgumentException("--gpu-memory-limit must be positive (or 0: the whole device), got " + memoryLimit);
        }
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
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, kvDtype, KernelSet.FULL, 0);
    }

    /** A bf16 KV cache. */
    public CudaOptions(int blockSize, int maxStepRows, double kvMemoryFraction, int maxKvBlocks, boolean cudaGraphs, Path gemmCache, long reserveBytes,
                       long extraKvBytesPerToken) {
        this(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, KvDtype.BF16);
    }

    /** These options with the KV cache stored as {@code d}. */
    public CudaOptions withKvDtype(KvDtype d) {
        return new CudaOptions(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, d, kernels,
                memoryLimit);
    }

    /** These options running the kernels of {@code set}. */
    public CudaOptions withKernels(KernelSet set) {
        return new CudaOptions(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, kvDtype, set,
                memoryLimit);
    }

    /** These options using at most {@code bytes} of device memory in all (0: the whole device). */
    public CudaOptions withMemoryLimit(long bytes) {
        return new CudaOptions(blockSize, maxStepRows, kvMemoryFraction, maxKvBlocks, cudaGraphs, gemmCache, reserveBytes, extraKvBytesPerToken, kvDtype, kernels,
                bytes);
    }

    /**
     * Device memory the KV pool may draw on, from the device's {free, total}: all that is free, or under a memory limit what
     * the limit leaves beside what is used already (weights, activations, the CUDA context).
     *
     * @throws CudaException where what is used already exceeds the limit
     */
    long available(long[] freeTotal) {
        if (memoryLimit == 0) {
            return freeTotal[0];
        }
        long used = freeTotal[1] - freeTotal[0];
        if (used > memoryLimit) {
            throw new CudaException(String.format(java.util.Locale.ROOT, "--gpu-memory-limit %.2f GiB: the weights, activations and CUDA context take"
                    + " %.2f GiB already", memoryLimit / (double) (1L << 30), used / (double) (1L << 30)));
        }
        return Math.min(freeTotal[0], memoryLimit - used);
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

    /**
     * A memory size as {@code --gpu-memory-limit} takes it: bytes, or a number with KiB, MiB, GiB (or K, M, G: the same) or
     * KB, MB, GB (powers of ten); 0 or none for no limit.
     */
    public static long parseMemory(String s) {
        String v = s == null ? "" : s.trim();
        if (v.isEmpty() || v.equalsIgnoreCase("none")) {
            return 0;
        }
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?i)([0-9]+(?:\\.[0-9]+)?)\\s*(KiB|MiB|GiB|K|M|G|KB|MB|GB|B)?").matcher(v);
        if (!m.matches()) {
            throw new IllegalArgumentException("--gpu-memory-limit: expected bytes or a size like 24GiB, got \"" + s + "\"");
        }
        double n = Double.parseDouble(m.group(1));
        String unit = m.group(2) == null ? "B" : m.group(2).toUpperCase(java.util.Locale.ROOT);
        double scale = switch (unit) {
            case "K", "KIB" -> 1L << 10;
            case "M", "MIB" -> 1L << 20;
            case "G", "GIB" -> 1L << 30;
            case "KB" -> 1e3;
            case "MB" -> 1e6;
            case "GB" -> 1e9;
            default -> 1;
        };
        return (long) (n * scale);
    }
}

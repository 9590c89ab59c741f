package dev.spindle.backend.cuda;

import dev.spindle.model.ModelConfig;
import dev.spindle.step.KvCapacity;
import dev.spindle.step.KvDtype;

/**
 * A pass's paged KV pool in device memory, in its {@link KvDtype}: per executed layer ("slot") one pool of blocks, the
 * slots' pools one after another. bf16: (blocks, 2, kvHeads, blockSize, headDim), K then V of each block; fp8: a block's
 * K codes (kvHeads, blockSize, headDim), V codes, K scales (kvHeads, blockSize) bf16, V scales (rope_kv_write.cu). The
 * blocks are what the free device memory allows after the weights and activations
 * ({@link #blocks}); zero-filled at start.
 */
final class KvPool implements AutoCloseable {
    /**
     * Device memory kept out of the KV pool's share: headroom for what the pass allocates after the pool (split-state and
     * tap buffers grown on demand, captured graphs).
     */
    static final long SPARE_BYTES = 512L << 20;

    private final CudaDriver cuda;
    /** The pool's base address. */
    final long base;
    /** Bytes of one slot's (executed layer's) pool. */
    final long slotBytes;
    /** Slots: the executed layers (layers x loops). */
    final int slots;
    final KvCapacity capacity;
    /** Whether the pool holds fp8 records (the attention and KV-write kernels' _kv8 twins read and write it). */
    final boolean kv8;

    KvPool(CudaDriver cuda, ModelConfig c, CudaOptions options) {
        this.cuda = cuda;
        KvDtype dtype = options.kvDtype();
        kv8 = dtype == KvDtype.FP8;
        slots = c.executedLayers();
        long bytesPerBlock = (long) slots * 2 * options.blockSize() * c.numKvHeads() * dtype.vectorBytes(c.headDim());
        long free = options.available(cuda.memInfo());
        int blocks = blocks(free, bytesPerBlock, options, c.numKvHeads());
        if (blocks < 1) {
            throw new CudaException("no device memory left for the KV pool: " + free + " bytes free after weights and activations"
                    + (options.memoryLimit() > 0 ? " under --gpu-memory-limit " + options.memoryLimit() : ""));
        }
        slotBytes = (long) blocks * 2 * options.blockSize() * c.numKvHeads() * dtype.vectorBytes(c.headDim());
        base = cuda.alloc((long) blocks * bytesPerBlock);
        cuda.memsetZero(base, (long) blocks * bytesPerBlock);
        cuda.sync();
        capacity = new KvCapacity(blocks, options.blockSize(), dtype);
    }

    /** Executed layer {@code slot}'s pool. */
    long slot(int slot) {
        return base + slot * slotBytes;
    }

    long bytes() {
        return slotBytes * slots;
    }

    /**
     * KV blocks a pass's pool gets from {@code freeBytes} of device memory (after the weights and activations), at
     * {@code bytesPerBlock} a block over all executed layers: the options' share of it less {@link #SPARE_BYTES}
     * and the memory reserved for a draft model opened next, which also needs {@code extraKvBytesPerToken} for each of the
     * pool's tokens; at most {@code maxKvBlocks} (where set), and no more than the attention kernels can number (a layer's
     * KV rows of one head's dims in 32 bits). 0 where nothing is left.
     */
    static int blocks(long freeBytes, long bytesPerBlock, CudaOptions options, int kvHeads) {
        long budget = (long) (freeBytes * options.kvMemoryFraction()) - SPARE_BYTES - options.reserveBytes();
        long perBlock = bytesPerBlock + options.extraKvBytesPerToken() * options.blockSize();
        long blocks = Math.min(Integer.MAX_VALUE - 1, Math.max(0, budget / perBlock));
        if (options.maxKvBlocks() > 0) {
            blocks = Math.min(blocks, options.maxKvBlocks());
        }
        return (int) Math.min(blocks, 0xFFFFFFFFL / (2L * kvHeads * options.blockSize()));
    }

    @Override
    public void close() {
        cuda.free(base);
    }
}

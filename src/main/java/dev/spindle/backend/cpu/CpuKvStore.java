package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.step.BlockIds;
import dev.spindle.step.KvDtype;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The bytes of the paged KV pool in host memory, in its {@link KvDtype} (bf16, the one this store holds today).
 * Layout: (blocks, slots, 2 [K, V], blockSize, kvHeads, headDim), so one block holds
 * every executed layer's K and V for its tokens and frees them together.
 * A slot is one executed layer: {@code layer + loop * numLayers}.
 */
public final class CpuKvStore implements AutoCloseable {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final Arena arena = Arena.ofShared();
    private final KvDtype dtype = KvDtype.BF16;
    private final MemorySegment data;
    private final int slots;
    private final int blockSize;
    private final int kvHeads;
    private final int headDim;

    public CpuKvStore(int numBlocks, int slots, int blockSize, int kvHeads, int headDim) {
        this.slots = slots;
        this.blockSize = blockSize;
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.data = arena.allocate((long) numBlocks * slots * 2 * blockSize * kvHeads * headDim * dtype.bytes, 64);
    }

    /** Bytes of bf16 KV per token (all slots, K and V). */
    public static long bytesPerToken(int slots, int kvHeads, int headDim) {
        return (long) slots * 2 * kvHeads * headDim * KvDtype.BF16.bytes;
    }

    KvDtype dtype() {
        return dtype;
    }

    MemorySegment data() {
        return data;
    }

    int headDim() {
        return headDim;
    }

    /** Byte offset of the head vector of K (kv = 0) or V (kv = 1) at {@code position} of a sequence. */
    long offset(BlockIds table, int slot, int kv, int position, int head) {
        int block = table.block(position / blockSize);
        int off = position % blockSize;
        return ((((((long) block * slots + slot) * 2 + kv) * blockSize + off) * kvHeads + head) * headDim) * 2;
    }

    /** Stores K and V rows (kvHeads x headDim each, bf16-valued) for {@code position}. */
    void write(BlockIds table, int slot, int position, float[] k, float[] v, int rowOffset) {
        long ko = offset(table, slot, 0, position, 0);
        long vo = offset(table, slot, 1, position, 0);
        int n = kvHeads * headDim;
        for (int i = 0; i < n; i++) {
            data.set(BF16, ko + 2L * i, Bf16.fromFloat(k[rowOffset + i]));
            data.set(BF16, vo + 2L * i, Bf16.fromFloat(v[rowOffset + i]));
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}

package dev.spindle.backend.cpu;

import dev.spindle.backend.KvCodec;
import dev.spindle.backend.KvRotation;
import dev.spindle.step.BlockIds;
import dev.spindle.step.KvDtype;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The bytes of the paged KV pool in host memory, in its {@link KvDtype}: one record a head vector ({@link KvCodec}); a
 * q8 or q4 store holds each head vector rotated ({@link KvRotation}) before it is quantized.
 * Layout: (blocks, slots, 2 [K, V], blockSize, kvHeads, record), so one block holds
 * every executed layer's K and V for its tokens and frees them together.
 * A slot is one executed layer: {@code layer + loop * numLayers}.
 */
public final class CpuKvStore implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final KvDtype dtype;
    private final int record;
    private final KvRotation rotation; // the integer formats hold rotated head vectors; null for bf16 and fp8
    private final MemorySegment data;
    private final int slots;
    private final int blockSize;
    private final int kvHeads;
    private final int headDim;

    public CpuKvStore(int numBlocks, int slots, int blockSize, int kvHeads, int headDim) {
        this(numBlocks, slots, blockSize, kvHeads, headDim, KvDtype.BF16);
    }

    public CpuKvStore(int numBlocks, int slots, int blockSize, int kvHeads, int headDim, KvDtype dtype) {
        if (!dtype.fits(headDim)) {
            throw new IllegalArgumentException("kv-cache-dtype " + dtype.label + " needs head_dim a multiple of " + dtype.groupSize(headDim) + ", got " + headDim);
        }
        this.dtype = dtype;
        this.record = dtype.vectorBytes(headDim);
        this.rotation = dtype.rotated ? new KvRotation(headDim) : null;
        this.slots = slots;
        this.blockSize = blockSize;
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.data = arena.allocate((long) numBlocks * slots * 2 * blockSize * kvHeads * record, 64);
    }

    /** Bytes of bf16 KV per token (all slots, K and V). */
    public static long bytesPerToken(int slots, int kvHeads, int headDim) {
        return bytesPerToken(slots, kvHeads, headDim, KvDtype.BF16);
    }

    /** Bytes of KV per token in {@code dtype} (all slots, K and V). */
    public static long bytesPerToken(int slots, int kvHeads, int headDim, KvDtype dtype) {
        return (long) slots * 2 * kvHeads * dtype.vectorBytes(headDim);
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
        return (((((long) block * slots + slot) * 2 + kv) * blockSize + off) * kvHeads + head) * record;
    }

    /** The rotation an integer-format store holds its head vectors in ({@link KvRotation}); null for bf16 and fp8. */
    KvRotation rotation() {
        return rotation;
    }

    /** The stored head vector of K (kv = 0) or V (kv = 1) at {@code position} (rotated in q8 and q4), decoded into {@code out[0, headDim)}. */
    void read(BlockIds table, int slot, int kv, int position, int head, float[] out) {
        KvCodec.decode(dtype, data, offset(table, slot, kv, position, head), headDim, out);
    }

    /** Stores K and V rows (kvHeads x headDim each, bf16-valued) for {@code position}, each head vector as one record. */
    void write(BlockIds table, int slot, int position, float[] k, float[] v, int rowOffset) {
        float[] r = rotation == null ? null : new float[headDim];
        for (int h = 0; h < kvHeads; h++) {
            for (int kv = 0; kv < 2; kv++) {
                float[] src = kv == 0 ? k : v;
                int at = rowOffset + h * headDim;
                if (rotation != null) {
                    rotation.rotate(src, at, r);
                    KvCodec.encode(dtype, r, 0, headDim, data, offset(table, slot, kv, position, h));
                } else {
                    KvCodec.encode(dtype, src, at, headDim, data, offset(table, slot, kv, position, h));
                }
            }
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}

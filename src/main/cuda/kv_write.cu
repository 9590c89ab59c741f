// kv_write: stores each row's K and V (from the fused qkv rows: k at column qDim, v after it) into
// the paged pool of one KV slot (layer run), layout (blocks, 2, kvHeads, blockSize, headDim): one head's keys of a
// block are contiguous (a 64-key tile of one head reads 4 KB runs); the slots'
// pools lie one after another, so one layer's blocks share few pages (and TLB entries). slotMap[r] is
// the row's physical token index (block * blockSize + offset). 16-byte copies (kvDim % 8 == 0).
// Grid: (rows), block: 128. Exact (a copy).
#include "common.cuh"

extern "C" __global__ void kv_write(const bf16 *qkv, int stride, int qDim, int kvDim, int headDim, bf16 *pool, const int *slotMap,
                                    int blockSize, int rows) {
    dependent_launch_entry();
    int r = blockIdx.x;
    if (r >= rows) return;
    long phys = slotMap[r], blk = phys / blockSize, off = phys % blockSize;
    long kBase = (blk * 2) * blockSize * kvDim + off * headDim;
    long vBase = kBase + (long) blockSize * kvDim;
    const bf16 *src = qkv + (long) r * stride + qDim;
    for (int i = 8 * threadIdx.x; i < kvDim; i += 8 * blockDim.x) {
        long o = (long) (i / headDim) * blockSize * headDim + i % headDim;
        *reinterpret_cast<uint4 *>(pool + kBase + o) = *reinterpret_cast<const uint4 *>(src + i);
        *reinterpret_cast<uint4 *>(pool + vBase + o) = *reinterpret_cast<const uint4 *>(src + kvDim + i);
    }
}

// kv_write: stores each row's K and V (from the fused qkv rows: k at column qDim, v after it) into
// the paged pool, layout (blocks, slots, 2, blockSize, kvHeads, headDim). slotMap[r] is the row's
// physical token index (block * blockSize + offset). Grid: (rows), block: 256. Exact (a copy).
#include "common.cuh"

extern "C" __global__ void kv_write(const bf16 *qkv, int stride, int qDim, int kvDim, bf16 *pool, const int *slotMap,
                                    int slot, int slots, int blockSize, int rows) {
    int r = blockIdx.x;
    if (r >= rows) return;
    long phys = slotMap[r], blk = phys / blockSize, off = phys % blockSize;
    long kBase = ((blk * slots + slot) * 2) * blockSize * kvDim + off * kvDim;
    long vBase = kBase + (long) blockSize * kvDim;
    const bf16 *src = qkv + (long) r * stride + qDim;
    for (int i = threadIdx.x; i < kvDim; i += blockDim.x) {
        pool[kBase + i] = src[i];
        pool[vBase + i] = src[kvDim + i];
    }
}

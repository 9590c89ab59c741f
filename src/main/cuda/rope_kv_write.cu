// rope_kv_write: rope then kv_write in one launch (the forward pass's per-layer step between the
// qkv GEMM and attention). Heads are taken in qkv order: q heads are rotated in place, k heads are
// rotated in place and stored into the pool, v heads are stored; the results are bit for bit those of
// rope followed by kv_write (the same arithmetic, rope.cuh). Pool layout as kv_write's:
// (blocks, 2, kvHeads, blockSize, headDim) for this slot; slotMap[r] = block * blockSize + offset.
// Grid: (rows, ceil((qHeads + 2 kvHeads) / (128 / (headDim / 4)))), block: 128. Exact.
#include "rope.cuh"

extern "C" __global__ void rope_kv_write(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows,
                                         int qHeads, int kvHeads, int headDim, bf16 *pool, const int *slotMap, int blockSize) {
    const int half = headDim / 2, perHead = half / 2, r = blockIdx.x;
    const int h = blockIdx.y * (blockDim.x / perHead) + threadIdx.x / perHead, i = 2 * (threadIdx.x % perHead);
    const bool active = r < rows && h < qHeads + 2 * kvHeads, rotated = h < qHeads + kvHeads;
    // the step's plan and the rope tables, read before the wait (see common.cuh)
    float2 c = make_float2(0.f, 0.f), s = c;
    long phys = 0;
    if (active) {
        if (rotated) {
            const long t = (long) positions[r] * half + i;
            c = *reinterpret_cast<const float2 *>(cos + t);
            s = *reinterpret_cast<const float2 *>(sin + t);
        }
        if (h >= qHeads) phys = slotMap[r];
    }
    dependent_launch_entry();
    if (!active) return;
    bf16 *p = x + (long) r * stride + (long) h * headDim;
    __nv_bfloat162 lo, hi;
    if (rotated) {
        rope_pairs_cs(p, i, half, c, s, lo, hi);
        if (h < qHeads) return;
    } else {
        lo = *reinterpret_cast<const __nv_bfloat162 *>(p + i);
        hi = *reinterpret_cast<const __nv_bfloat162 *>(p + i + half);
    }
    const bool isV = h >= qHeads + kvHeads;
    const int kvh = h - qHeads - (isV ? kvHeads : 0);
    const long blk = phys / blockSize, off = phys % blockSize, kvDim = (long) kvHeads * headDim;
    bf16 *dst = pool + (blk * 2 + (isV ? 1 : 0)) * blockSize * kvDim + ((long) kvh * blockSize + off) * headDim;
    *reinterpret_cast<__nv_bfloat162 *>(dst + i) = lo;
    *reinterpret_cast<__nv_bfloat162 *>(dst + i + half) = hi;
}

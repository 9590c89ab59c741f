// rope_kv_write: rope then kv_write in one launch (the forward pass's per-layer step between the
// qkv GEMM and attention). Heads are taken in qkv order: q heads are rotated in place, k heads are
// rotated in place and stored into the pool, v heads are stored; the results are bit for bit those of
// rope followed by kv_write (the same arithmetic, rope.cuh). Pool layout as kv_write's:
// (blocks, 2, kvHeads, blockSize, headDim) for this slot; slotMap[r] = block * blockSize + offset.
// Grid: (rows, ceil((qHeads + 2 kvHeads) / (128 / (headDim / 4)))), block: 128. Exact.
//
// rope_kv_write_kv8: the same into an fp8 KV pool (--kv-cache-dtype fp8; backend.KvCodec's record): each K and V head
// vector as E4M3 codes encode(x / s) and one bf16 scale s = its largest magnitude over 448 rounded up (fp8.cuh), the
// head's headDim / 4 threads agreeing on the maximum by shuffles. A block of the slot's pool holds, in bytes: K codes
// (kvHeads, blockSize, headDim), V codes, K scales (kvHeads, blockSize) bf16, V scales: 2 kvHeads blockSize (headDim + 2)
// bytes. Exact (the CPU store's values).
#include "rope.cuh"
#include "fp8.cuh"

template <bool KV8>
__device__ __forceinline__ void rope_kv_write_impl(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows,
                                                   int qHeads, int kvHeads, int headDim, void *pool, const int *slotMap, int blockSize) {
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
    if constexpr (!KV8) {
        bf16 *dst = static_cast<bf16 *>(pool) + (blk * 2 + (isV ? 1 : 0)) * blockSize * kvDim + ((long) kvh * blockSize + off) * headDim;
        *reinterpret_cast<__nv_bfloat162 *>(dst + i) = lo;
        *reinterpret_cast<__nv_bfloat162 *>(dst + i + half) = hi;
    } else {
        const float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
        float amax = fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y)));
        // the head's perHead lanes (a whole warp at head dim 128; aligned groups below it) agree on its maximum
        const int lane = threadIdx.x & 31;
        const unsigned group = perHead >= 32 ? 0xFFFFFFFFu : ((1u << perHead) - 1) << (lane / perHead * perHead);
        for (int o = 1; o < perHead && o < 32; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(group, amax, o));
        const float sc = kv8_scale(amax);
        unsigned char *block = static_cast<unsigned char *>(pool) + blk * 2 * blockSize * kvDim + blk * 2 * blockSize * kvHeads * 2;
        const long rec = (long) (isV ? kvHeads : 0) * blockSize + (long) kvh * blockSize + off;
        unsigned char *codes = block + rec * headDim;
        codes[i] = (unsigned char) fp8_encode(__fdiv_rn(a.x, sc));
        codes[i + 1] = (unsigned char) fp8_encode(__fdiv_rn(a.y, sc));
        codes[i + half] = (unsigned char) fp8_encode(__fdiv_rn(b.x, sc));
        codes[i + half + 1] = (unsigned char) fp8_encode(__fdiv_rn(b.y, sc));
        if (i == 0) reinterpret_cast<bf16 *>(block + 2 * blockSize * kvDim)[rec] = __float2bfloat16_rn(sc);
    }
}

extern "C" __global__ void rope_kv_write(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows,
                                         int qHeads, int kvHeads, int headDim, bf16 *pool, const int *slotMap, int blockSize) {
    rope_kv_write_impl<false>(x, stride, cos, sin, positions, rows, qHeads, kvHeads, headDim, pool, slotMap, blockSize);
}

extern "C" __global__ void rope_kv_write_kv8(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows,
                                             int qHeads, int kvHeads, int headDim, unsigned char *pool, const int *slotMap, int blockSize) {
    rope_kv_write_impl<true>(x, stride, cos, sin, positions, rows, qHeads, kvHeads, headDim, pool, slotMap, blockSize);
}

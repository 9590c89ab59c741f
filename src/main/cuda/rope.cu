// rope: rotate-half RoPE in place on the q and k heads of the fused qkv rows,
// x = bf16(bf16(x*cos) + bf16(rotate_half(x)*sin)); cos/sin are bf16-valued fp32 tables
// (positions, headDim/2) indexed by each row's position. A thread rotates two adjacent pairs (i, i+1)
// with (i + half, i + half + 1) through bf16x2 loads; headDim % 4 == 0.
// Grid: (rows, ceil(heads / (128 / (headDim / 4)))), block: 128 (128 / (headDim / 4) heads per CTA). Exact.
#include "common.cuh"

__device__ __forceinline__ float rope_lo(float a, float b, float c, float s) { return rnd(__fadd_rn(rnd(__fmul_rn(a, c)), rnd(__fmul_rn(-b, s)))); }
__device__ __forceinline__ float rope_hi(float a, float b, float c, float s) { return rnd(__fadd_rn(rnd(__fmul_rn(b, c)), rnd(__fmul_rn(a, s)))); }

extern "C" __global__ void rope(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows, int heads, int headDim) {
    const int half = headDim / 2, perHead = half / 2, r = blockIdx.x;
    const int h = blockIdx.y * (blockDim.x / perHead) + threadIdx.x / perHead, i = 2 * (threadIdx.x % perHead);
    if (r >= rows || h >= heads) return;
    bf16 *p = x + (long) r * stride + (long) h * headDim;
    const long t = (long) positions[r] * half + i;
    const float2 c = *reinterpret_cast<const float2 *>(cos + t), s = *reinterpret_cast<const float2 *>(sin + t);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p + i));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p + i + half));
    *reinterpret_cast<__nv_bfloat162 *>(p + i) = __floats2bfloat162_rn(rope_lo(a.x, b.x, c.x, s.x), rope_lo(a.y, b.y, c.y, s.y));
    *reinterpret_cast<__nv_bfloat162 *>(p + i + half) = __floats2bfloat162_rn(rope_hi(a.x, b.x, c.x, s.x), rope_hi(a.y, b.y, c.y, s.y));
}

// RoPE arithmetic shared by rope and rope_kv_write: rotate-half on bf16 values with bf16-valued
// fp32 cos/sin, x = bf16(bf16(x*cos) + bf16(rotate_half(x)*sin)), HF's rounding points.
#pragma once
#include "common.cuh"

__device__ __forceinline__ float rope_lo(float a, float b, float c, float s) { return rnd(__fadd_rn(rnd(__fmul_rn(a, c)), rnd(__fmul_rn(-b, s)))); }
__device__ __forceinline__ float rope_hi(float a, float b, float c, float s) { return rnd(__fadd_rn(rnd(__fmul_rn(b, c)), rnd(__fmul_rn(a, s)))); }

// Rotates the pairs (i, i+1) and (i + half, i + half + 1) of the head at p by the table's (cos, sin) pairs c, s.
__device__ __forceinline__ void rope_pairs_cs(bf16 *p, int i, int half, float2 c, float2 s, __nv_bfloat162 &lo, __nv_bfloat162 &hi) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p + i));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p + i + half));
    lo = __floats2bfloat162_rn(rope_lo(a.x, b.x, c.x, s.x), rope_lo(a.y, b.y, c.y, s.y));
    hi = __floats2bfloat162_rn(rope_hi(a.x, b.x, c.x, s.x), rope_hi(a.y, b.y, c.y, s.y));
    *reinterpret_cast<__nv_bfloat162 *>(p + i) = lo;
    *reinterpret_cast<__nv_bfloat162 *>(p + i + half) = hi;
}

// The same at table offset t (position * half + i).
__device__ __forceinline__ void rope_pairs(bf16 *p, int i, int half, const float *cos, const float *sin, long t,
                                           __nv_bfloat162 &lo, __nv_bfloat162 &hi) {
    rope_pairs_cs(p, i, half, *reinterpret_cast<const float2 *>(cos + t), *reinterpret_cast<const float2 *>(sin + t), lo, hi);
}

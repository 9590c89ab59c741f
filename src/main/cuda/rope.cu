// rope: rotate-half RoPE in place on the q and k heads of the fused qkv rows,
// x = bf16(bf16(x*cos) + bf16(rotate_half(x)*sin)); cos/sin are bf16-valued fp32 tables
// (positions, headDim/2) indexed by each row's position. Grid: (rows, q+kv heads), block: headDim/2. Exact.
#include "common.cuh"

extern "C" __global__ void rope(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows, int heads, int headDim) {
    int r = blockIdx.x, h = blockIdx.y, i = threadIdx.x, half = headDim / 2;
    if (r >= rows || h >= heads || i >= half) return;
    long o = (long) r * stride + (long) h * headDim;
    long t = (long) positions[r] * half + i;
    float c = cos[t], s = sin[t];
    float a = ld(x, o + i), b = ld(x, o + i + half);
    float lo = rnd(__fadd_rn(rnd(__fmul_rn(a, c)), rnd(__fmul_rn(-b, s))));
    float hi = rnd(__fadd_rn(rnd(__fmul_rn(b, c)), rnd(__fmul_rn(a, s))));
    st(x, o + i, lo);
    st(x, o + i + half, hi);
}

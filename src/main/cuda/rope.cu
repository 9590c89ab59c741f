// rope: rotate-half RoPE in place, x = bf16(bf16(x*cos) + bf16(rotate_half(x)*sin)), cos/sin given
// per row as bf16-valued fp32 (n, headDim/2). Grid: (rows, heads), block: headDim/2. Exact.
#include "common.cuh"

extern "C" __global__ void rope(bf16 *x, const float *cos, const float *sin, int rows, int heads, int headDim) {
    int r = blockIdx.x, h = blockIdx.y, i = threadIdx.x, half = headDim / 2;
    if (r >= rows || h >= heads || i >= half) return;
    long o = ((long) r * heads + h) * headDim;
    float c = cos[(long) r * half + i], s = sin[(long) r * half + i];
    float a = ld(x, o + i), b = ld(x, o + i + half);
    float lo = rnd(__fadd_rn(rnd(__fmul_rn(a, c)), rnd(__fmul_rn(-b, s))));
    float hi = rnd(__fadd_rn(rnd(__fmul_rn(b, c)), rnd(__fmul_rn(a, s))));
    st(x, o + i, lo);
    st(x, o + i + half, hi);
}

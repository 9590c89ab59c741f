// rope: rotate-half RoPE in place on the q and k heads of the fused qkv rows (rope.cuh's arithmetic);
// cos/sin are bf16-valued fp32 tables (positions, headDim/2) indexed by each row's position. A thread
// rotates two adjacent pairs (i, i+1) with (i + half, i + half + 1) through bf16x2 loads; headDim % 4 == 0.
// Grid: (rows, ceil(heads / (128 / (headDim / 4)))), block: 128 (128 / (headDim / 4) heads per CTA). Exact.
#include "rope.cuh"

extern "C" __global__ void rope(bf16 *x, int stride, const float *cos, const float *sin, const int *positions, int rows, int heads, int headDim) {
    dependent_launch_entry();
    const int half = headDim / 2, perHead = half / 2, r = blockIdx.x;
    const int h = blockIdx.y * (blockDim.x / perHead) + threadIdx.x / perHead, i = 2 * (threadIdx.x % perHead);
    if (r >= rows || h >= heads) return;
    __nv_bfloat162 lo, hi;
    rope_pairs(x + (long) r * stride + (long) h * headDim, i, half, cos, sin, (long) positions[r] * half + i, lo, hi);
}

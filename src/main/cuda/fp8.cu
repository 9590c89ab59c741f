// fp8 weights (fp8.cuh's codec): quantized on the device at load, and expanded to bf16 for the GEMMs of many rows.
//
// quantize_fp8(src, rows, cols, blockRows, blockCols, q, scales): src (rows, cols) bf16 row-major into q (rows, cols)
//   E4M3 and scales (ceil(rows / blockRows), ceil(cols / blockCols)) fp32, as model.Fp8Quantizer does on the host, bit for
//   bit: a block's scale is its largest magnitude over 448 (1 for a block of zeros), each value encode(w / scale). Grid
//   (column blocks, row blocks), block 256: one CTA a block (the maximum is exact in any order).
//
// dequant_fp8(q, scales, rows, cols, blockRows, blockCols, out): out (rows, cols) bf16 = bf16(decode(q) * scale), the values
//   linear_rows' fp8 variants compute in shared memory, so that cuBLASLt's GEMM over out gives their bits. Grid-stride,
//   block 256, 8 elements a thread (cols % 8 == 0).
#include "fp8.cuh"

extern "C" __global__ void quantize_fp8(const bf16 *src, int rows, int cols, int blockRows, int blockCols, unsigned char *q, float *scales) {
    dependent_launch_entry();
    __shared__ float part[256 / 32];
    const int r0 = blockIdx.y * blockRows, r1 = min(rows, r0 + blockRows), c0 = blockIdx.x * blockCols, c1 = min(cols, c0 + blockCols);
    const int w = c1 - c0;
    const long count = (long) (r1 - r0) * w;
    float amax = 0.f;
    for (long i = threadIdx.x; i < count; i += blockDim.x) {
        amax = fmaxf(amax, fabsf(ld(src, (long) (r0 + i / w) * cols + c0 + i % w)));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = 0.f;
    for (int i = 0; i < (int) (blockDim.x >> 5); i++) amax = fmaxf(amax, part[i]);
    const float scale = amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
    if (threadIdx.x == 0) scales[(long) blockIdx.y * gridDim.x + blockIdx.x] = scale;
    for (long i = threadIdx.x; i < count; i += blockDim.x) {
        const long at = (long) (r0 + i / w) * cols + c0 + i % w;
        q[at] = (unsigned char) fp8_encode(__fdiv_rn(ld(src, at), scale));
    }
}

extern "C" __global__ void dequant_fp8(const unsigned char *q, const float *scales, int rows, int cols, int blockRows, int blockCols, bf16 *out) {
    dependent_launch_entry();
    const int sc = (cols + blockCols - 1) / blockCols;
    const long n8 = (long) rows * cols / 8;
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n8; i += (long) gridDim.x * blockDim.x) {
        const long at = 8 * i;
        const int r = (int) (at / cols), c = (int) (at % cols);
        const uint2 raw = *reinterpret_cast<const uint2 *>(q + at);
        uint4 o;
        __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&o);
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned word = j < 2 ? raw.x : raw.y, sh = 16 * (j & 1);
            // the 8 columns may straddle a column block only where blockCols is not a multiple of 8: each its own scale
            const float s0 = scales[(long) (r / blockRows) * sc + (c + 2 * j) / blockCols];
            const float s1 = scales[(long) (r / blockRows) * sc + (c + 2 * j + 1) / blockCols];
            o2[j].x = fp8_weight((word >> sh) & 0xFFu, s0);
            o2[j].y = fp8_weight((word >> (sh + 8)) & 0xFFu, s1);
        }
        *reinterpret_cast<uint4 *>(out + at) = o;
    }
}

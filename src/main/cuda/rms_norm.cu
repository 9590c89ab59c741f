// rms_norm: out = bf16(bf16(x * rsqrt(mean(x^2) + eps)) * w), as HF's LlamaRMSNorm; with y given
// (add_rms_norm), first x = bf16(x + y), the residual add HF does before the norm.
// Grid: (rows), block: 256. width % 8 == 0: each thread takes 8 elements (16 bytes) at a time, chunks
// threadIdx, threadIdx + 256, ... (rows up to 8,192 wide held in registers: norm_row_regs).
// The sum of squares is per thread in element order, then a fixed shuffle tree per warp and the
// warps in order: the same for every row whatever the batch, but not the CPU twin's sequential
// order, so within 1 bf16 ulp of it per element.
#include "common.cuh"

// x = bf16(x + y) on one 8-element chunk (the residual add), when y is given.
__device__ __forceinline__ void add_chunk(uint4 &xv, const uint4 &yv) {
    bf16 *xe = reinterpret_cast<bf16 *>(&xv);
    const bf16 *ye = reinterpret_cast<const bf16 *>(&yv);
    #pragma unroll
    for (int j = 0; j < 8; j++) xe[j] = __float2bfloat16_rn(__fadd_rn(__bfloat162float(xe[j]), __bfloat162float(ye[j])));
}

// The chunk's squares added to the thread's sum, in element order.
__device__ __forceinline__ float square_chunk(const uint4 &xv, float ss) {
    const bf16 *xe = reinterpret_cast<const bf16 *>(&xv);
    #pragma unroll
    for (int j = 0; j < 8; j++) {
        float v = __bfloat162float(xe[j]);
        ss = __fmaf_rn(v, v, ss);
    }
    return ss;
}

// 1 / sqrt(mean + eps) of the row from the threads' sums: a fixed shuffle tree per warp, the warps in order.
__device__ __forceinline__ float inverse_rms(float ss, int width, float eps) {
    __shared__ float part[32];
    #pragma unroll
    for (int m = 16; m > 0; m >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, m));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < (blockDim.x >> 5); i++) total = __fadd_rn(total, part[i]);
    return __fdiv_rn(1.f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, (float) width), eps)));
}

// out = bf16(bf16(x * inv) * w) on one chunk.
__device__ __forceinline__ uint4 norm_chunk(const uint4 &xv, const uint4 &wv, float inv) {
    const bf16 *xe = reinterpret_cast<const bf16 *>(&xv), *we = reinterpret_cast<const bf16 *>(&wv);
    uint4 ov;
    bf16 *oe = reinterpret_cast<bf16 *>(&ov);
    #pragma unroll
    for (int j = 0; j < 8; j++) {
        float normed = rnd(__fmul_rn(__bfloat162float(xe[j]), inv));
        oe[j] = __float2bfloat16_rn(__fmul_rn(normed, __bfloat162float(we[j])));
    }
    return ov;
}

__device__ __forceinline__ void norm_row(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int width, float eps) {
    long o = (long) blockIdx.x * width;
    float ss = 0.f;
    for (int c = threadIdx.x * 8; c < width; c += blockDim.x * 8) {
        uint4 xv = *reinterpret_cast<const uint4 *>(x + o + c);
        if (y != nullptr) {
            uint4 yv = *reinterpret_cast<const uint4 *>(y + o + c);
            add_chunk(xv, yv);
            *reinterpret_cast<uint4 *>(x + o + c) = xv;
        }
        ss = square_chunk(xv, ss);
    }
    float inv = inverse_rms(ss, width, eps);
    for (int c = threadIdx.x * 8; c < width; c += blockDim.x * 8) {
        uint4 xv = *reinterpret_cast<const uint4 *>(x + o + c), wv = *reinterpret_cast<const uint4 *>(w + c);
        *reinterpret_cast<uint4 *>(out + o + c) = norm_chunk(xv, wv, inv);
    }
}

// The same arithmetic in the same order as norm_row, for rows of at most 256 * 8 * MAXC elements: every
// load of the thread's x, y and w chunks is issued first (one memory round trip instead of one per chunk
// and loop: the stores to x and out may alias the loads, so the loop above cannot be reordered), and the
// output is computed from the registers. Decode steps (one row, one CTA) are bound by that latency. The
// norm's weights are read before the kernel waits on the one before it (common.cuh).
template <int MAXC>
__device__ __forceinline__ void norm_row_regs(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int width, float eps) {
    long o = (long) blockIdx.x * width;
    uint4 xv[MAXC], yv[MAXC], wv[MAXC];
    // the weights before the wait (see common.cuh), the rows after it
    #pragma unroll
    for (int k = 0; k < MAXC; k++) {
        int c = (threadIdx.x + k * blockDim.x) * 8;
        if (c < width) wv[k] = *reinterpret_cast<const uint4 *>(w + c);
    }
    dependent_launch_entry();
    #pragma unroll
    for (int k = 0; k < MAXC; k++) {
        int c = (threadIdx.x + k * blockDim.x) * 8;
        if (c < width) {
            xv[k] = *reinterpret_cast<const uint4 *>(x + o + c);
            if (y != nullptr) yv[k] = *reinterpret_cast<const uint4 *>(y + o + c);
        }
    }
    float ss = 0.f;
    #pragma unroll
    for (int k = 0; k < MAXC; k++) {
        int c = (threadIdx.x + k * blockDim.x) * 8;
        if (c >= width) break;
        if (y != nullptr) {
            add_chunk(xv[k], yv[k]);
            *reinterpret_cast<uint4 *>(x + o + c) = xv[k];
        }
        ss = square_chunk(xv[k], ss);
    }
    float inv = inverse_rms(ss, width, eps);
    #pragma unroll
    for (int k = 0; k < MAXC; k++) {
        int c = (threadIdx.x + k * blockDim.x) * 8;
        if (c >= width) break;
        *reinterpret_cast<uint4 *>(out + o + c) = norm_chunk(xv[k], wv[k], inv);
    }
}

#define NORM_REGS_CHUNKS 4

__device__ __forceinline__ void norm_any_row(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int width, float eps) {
    if (width <= (int) blockDim.x * 8 * NORM_REGS_CHUNKS) norm_row_regs<NORM_REGS_CHUNKS>(x, y, w, out, width, eps);
    else {
        dependent_launch_entry();
        norm_row(x, y, w, out, width, eps);
    }
}

extern "C" __global__ void rms_norm(bf16 *x, const bf16 *w, bf16 *out, int rows, int width, float eps) {
    if (blockIdx.x < rows) norm_any_row(x, nullptr, w, out, width, eps);
}

extern "C" __global__ void add_rms_norm(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int rows, int width, float eps) {
    if (blockIdx.x < rows) norm_any_row(x, y, w, out, width, eps);
}

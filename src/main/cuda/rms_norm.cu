// rms_norm: out = bf16(bf16(x * rsqrt(mean(x^2) + eps)) * w), as HF's LlamaRMSNorm; with y given
// (add_rms_norm), first x = bf16(x + y), the residual add HF does before the norm.
// Grid: (rows), block: 256 (a power of two). The sum of squares is a tree reduction in fp32,
// so it differs from the CPU twin's sequential order: within 1 bf16 ulp per element.
#include "common.cuh"

__device__ __forceinline__ void norm_row(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int width, float eps) {
    __shared__ float part[256];
    long o = (long) blockIdx.x * width;
    float ss = 0.f;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        float v = ld(x, o + i);
        if (y != nullptr) {
            v = rnd(__fadd_rn(v, ld(y, o + i)));
            st(x, o + i, v);
        }
        ss = __fmaf_rn(v, v, ss);
    }
    part[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] = __fadd_rn(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    float inv = __fdiv_rn(1.f, __fsqrt_rn(__fadd_rn(__fdiv_rn(part[0], (float) width), eps)));
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        float normed = rnd(__fmul_rn(ld(x, o + i), inv));
        st(out, o + i, __fmul_rn(normed, ld(w, i)));
    }
}

extern "C" __global__ void rms_norm(bf16 *x, const bf16 *w, bf16 *out, int rows, int width, float eps) {
    if (blockIdx.x < rows) norm_row(x, nullptr, w, out, width, eps);
}

extern "C" __global__ void add_rms_norm(bf16 *x, const bf16 *y, const bf16 *w, bf16 *out, int rows, int width, float eps) {
    if (blockIdx.x < rows) norm_row(x, y, w, out, width, eps);
}

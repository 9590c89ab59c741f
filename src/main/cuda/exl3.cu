// exl3: the EXL3 linear layer (exllamav3's trellis-coded weights) in three launches, y = sv ⊙ H(Ŵᵀ H(su ⊙ x)), as the
// CPU reference (Exl3MatMul) defines it. The input and output transforms are the CPU's to the bit: x times su in fp32,
// the 128-point Sylvester butterfly in the same pairing and order (a + c at the lower index, a - c at the upper), then the
// scale 1/sqrt(128); the output times sv, one rounding to bf16. Only the product's sums run in this kernel's own order
// (fp32, each row's the same whatever the rows beside it).
//
// Ŵ: one 16x16 tile a row of `trellis` (kPad/16, ntTotal, 16 K) uint16: 256 K bits, MSB-first in 32-bit little-endian
// words; weight t reads the 16-bit state of bits [(t+1)K - 16, (t+1)K) cyclically; the tensor-core order puts lane l's
// weights 8l..8l+7 at rows r0, r0+1, r0+8, r0+9 (r0 = 2 (l mod 4)) of columns l/4 and l/4 + 8. The codebooks (cb 0 3inst,
// 1 mcg, 2 mul1) give exllamav3's fp16 values: each sum or fused product-sum below is exact in fp32 and rounded once to fp16.
#include "common.cuh"
#include <cuda_fp16.h>
#include <stdint.h>

#define EXL3_ROWS 8
#define EXL3_WARPS 4
#define EXL3_R_SCALE 0.08838834764831845f

__device__ __forceinline__ float exl3_value(uint32_t code, int cb) {
    uint32_t x = code & 0xFFFFu;
    if (cb == 2) {
        x *= 0x83DCD12Du;
        uint32_t s = (x & 0xFFu) + ((x >> 8) & 0xFFu) + ((x >> 16) & 0xFFu) + (x >> 24);
        float v = fmaf((float) (1024u + s), __half2float(__ushort_as_half((unsigned short) 0x1eee)),
                       __half2float(__ushort_as_half((unsigned short) 0xc931)));
        return __half2float(__float2half_rn(v));
    }
    x = cb == 0 ? x * 89226354u + 64248484u : x * 0xCBAC1FEDu;
    x = (x & 0x8fff8fffu) ^ 0x3b603b60u;
    float lo = __half2float(__ushort_as_half((unsigned short) (x & 0xFFFFu)));
    float hi = __half2float(__ushort_as_half((unsigned short) (x >> 16)));
    return __half2float(__float2half_rn(__fadd_rn(lo, hi)));
}

// v (this thread's element of a 128-block) transformed: the butterfly over s (128 floats of shared memory), then the scale.
__device__ __forceinline__ float exl3_hadamard(float v, float *s) {
    int t = threadIdx.x;
    for (int h = 1; h < 128; h <<= 1) {
        __syncthreads();
        s[t] = v;
        __syncthreads();
        float o = s[t ^ h];
        v = (t & h) ? __fsub_rn(o, v) : __fadd_rn(v, o);
    }
    return __fmul_rn(v, EXL3_R_SCALE);
}

// xh (rows, span) = H(su ⊙ x) over x's columns [0, k) (zeros past k); grid (rows, span / 128), block 128. su: fp16, from its
// first input col0.
extern "C" __global__ void exl3_had_in(const bf16 *x, int ldx, int k, const unsigned short *su, int col0, int span, float *xh) {
    dependent_launch_entry();
    __shared__ float s[128];
    int row = blockIdx.x, i = blockIdx.y * 128 + threadIdx.x;
    float v = i < k ? __fmul_rn(ld(x, (long) row * ldx + i), __half2float(__ushort_as_half(su[col0 + i]))) : 0.f;
    xh[(long) row * span + i] = exl3_hadamard(v, s);
}

// yh (rows, nSpan) = xh (rows, kSpan) Ŵ[kt0 .., nt0 ..]: one CTA of EXL3_WARPS warps a 16-column group (grid nSpan / 16);
// warp w takes the k tiles w, w + EXL3_WARPS, ..., its lanes each decoding 8 weights of a tile and summing 4 rows x 2
// columns, the 4 lanes of a column added (xor 1, then xor 2); then the warps' sums added in warp order through shared memory
// (((w0 + w1) + w2) + w3). The same order for every row whatever the rows beside it. At most EXL3_ROWS rows a launch.
extern "C" __global__ void __launch_bounds__(32 * EXL3_WARPS) exl3_gemv(const float *xh, int rows, int kSpan, const unsigned short *trellis,
                                                                       int ntTotal, int kt0, int nt0, int bits, int cb, float *yh, int nSpan) {
    dependent_launch_entry();
    __shared__ float part[EXL3_WARPS][EXL3_ROWS][16];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = blockIdx.x;
    int r0 = (lane & 3) * 2, c0 = lane >> 2, words = 8 * bits;
    float acc[EXL3_ROWS][2];
#pragma unroll
    for (int r = 0; r < EXL3_ROWS; r++) {
        acc[r][0] = acc[r][1] = 0.f;
    }
    for (int kt = warp; kt < kSpan / 16; kt += EXL3_WARPS) {
        const uint32_t *tile = (const uint32_t *) (trellis + ((long) (kt0 + kt) * ntTotal + nt0 + g) * 16 * bits);
        float w[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int t = lane * 8 + j, b0 = t * bits + bits - 16 + 256 * bits, b1 = b0 + 16;
            int i0 = b0 / 32, i1 = (b1 - 1) / 32, s0 = (i1 + 1) * 32 - b1;
            unsigned long long two = ((unsigned long long) __ldg(tile + i0 % words) << 32) | __ldg(tile + i1 % words);
            w[j] = exl3_value((uint32_t) (two >> s0) & 0xFFFFu, cb);
        }
#pragma unroll
        for (int r = 0; r < EXL3_ROWS; r++) {
            if (r < rows) {
                const float *xr = xh + (long) r * kSpan + kt * 16;
                float x0 = xr[r0], x1 = xr[r0 + 1], x2 = xr[r0 + 8], x3 = xr[r0 + 9];
                acc[r][0] = fmaf(w[3], x3, fmaf(w[2], x2, fmaf(w[1], x1, fmaf(w[0], x0, acc[r][0]))));
                acc[r][1] = fmaf(w[7], x3, fmaf(w[6], x2, fmaf(w[5], x1, fmaf(w[4], x0, acc[r][1]))));
            }
        }
    }
#pragma unroll
    for (int r = 0; r < EXL3_ROWS; r++) {
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float v = acc[r][c];
            v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
            v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
            if ((lane & 3) == 0) {
                part[warp][r][c0 + 8 * c] = v;
            }
        }
    }
    __syncthreads();
    int r = threadIdx.x >> 4, col = threadIdx.x & 15; // 128 threads: 8 rows x 16 columns
    if (r < rows && r < EXL3_ROWS) {
        float v = part[0][r][col];
#pragma unroll
        for (int w = 1; w < EXL3_WARPS; w++) {
            v = __fadd_rn(v, part[w][r][col]);
        }
        yh[(long) r * nSpan + g * 16 + col] = v;
    }
}

// y (rows, ldy) columns [0, nOut) = bf16(sv ⊙ H(yh)) (rounded), or the fp32 value into yf where y is null (a rank's partial);
// grid (rows, nSpan / 128), block 128. sv: fp16, from its output first.
extern "C" __global__ void exl3_had_out(const float *yh, int nSpan, const unsigned short *sv, int first, int nOut, bf16 *y, float *yf, int ldy) {
    dependent_launch_entry();
    __shared__ float s[128];
    int row = blockIdx.x, j = blockIdx.y * 128 + threadIdx.x;
    float v = exl3_hadamard(yh[(long) row * nSpan + j], s);
    if (j < nOut) {
        float o = __fmul_rn(v, __half2float(__ushort_as_half(sv[first + j])));
        if (y != nullptr) {
            st(y, (long) row * ldy + j, o);
        } else {
            yf[(long) row * ldy + j] = o;
        }
    }
}

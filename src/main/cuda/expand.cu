// expand: a quantized weight's rows as the bf16 values every linear layer reads (the CPU's expand() of GgmlMatrix,
// MlxMatrix and Nvfp4Matrix, to the bit), written into rows [row0, row0 + rows) of a (_, cols) bf16 matrix that cuBLASLt's
// pinned GEMM then reads: the same bits at every row count. Each value is the format's own fp32 decoding (ggml's reference
// dequantization, mlx's scale * q + bias, NVFP4's e2m1 * (e4m3 scale with the tensor scale)), each product and sum rounded
// once as written (no fused multiply-adds: __fmul_rn / __fadd_rn / __fsub_rn), then one rounding to bf16.
#include "common.cuh"
#include "fp8.cuh"
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ unsigned ex_u8(const uint8_t *p) { return *p; }
__device__ __forceinline__ int ex_i8(const uint8_t *p) { return (int) (signed char) *p; }
__device__ __forceinline__ float ex_f16(const uint8_t *p) { return __half2float(__ushort_as_half((unsigned short) (p[0] | (p[1] << 8)))); }
__device__ __forceinline__ unsigned ex_u32(const uint8_t *p) { return p[0] | (p[1] << 8) | (p[2] << 16) | ((unsigned) p[3] << 24); }
__device__ __forceinline__ float ex_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ void ex_put(bf16 *y, int i, float v) { y[i] = __float2bfloat16_rn(v); }

__constant__ int EX_IQ4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ggml's get_scale_min_k4: the j-th 6-bit scale and min of a K-quant's 12 scale bytes
__device__ __forceinline__ int ex_scale(const uint8_t *q, int j) { return j < 4 ? q[j] & 63 : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); }
__device__ __forceinline__ int ex_min(const uint8_t *q, int j) { return j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }

// one block of ggml type t (GgmlType ids) at p into y[0, elements)
__device__ void ex_block(int t, const uint8_t *p, bf16 *y) {
    switch (t) {
    case 2: { // Q4_0
        float d = ex_f16(p);
        for (int j = 0; j < 16; j++) {
            unsigned q = p[2 + j];
            ex_put(y, j, ex_mul((float) ((int) (q & 0xF) - 8), d));
            ex_put(y, j + 16, ex_mul((float) ((int) (q >> 4) - 8), d));
        }
        break;
    }
    case 3: { // Q4_1
        float d = ex_f16(p), m = ex_f16(p + 2);
        for (int j = 0; j < 16; j++) {
            unsigned q = p[4 + j];
            ex_put(y, j, __fadd_rn(ex_mul((float) (q & 0xF), d), m));
            ex_put(y, j + 16, __fadd_rn(ex_mul((float) (q >> 4), d), m));
        }
        break;
    }
    case 6: { // Q5_0
        float d = ex_f16(p);
        unsigned qh = ex_u32(p + 2);
        for (int j = 0; j < 16; j++) {
            unsigned q = p[6 + j], h0 = ((qh >> j) << 4) & 0x10u, h1 = (qh >> (j + 12)) & 0x10u;
            ex_put(y, j, ex_mul((float) ((int) ((q & 0xF) | h0) - 16), d));
            ex_put(y, j + 16, ex_mul((float) ((int) ((q >> 4) | h1) - 16), d));
        }
        break;
    }
    case 7: { // Q5_1
        float d = ex_f16(p), m = ex_f16(p + 2);
        unsigned qh = ex_u32(p + 4);
        for (int j = 0; j < 16; j++) {
            unsigned q = p[8 + j], h0 = ((qh >> j) << 4) & 0x10u, h1 = (qh >> (j + 12)) & 0x10u;
            ex_put(y, j, __fadd_rn(ex_mul((float) ((q & 0xF) | h0), d), m));
            ex_put(y, j + 16, __fadd_rn(ex_mul((float) ((q >> 4) | h1), d), m));
        }
        break;
    }
    case 8: { // Q8_0
        float d = ex_f16(p);
        for (int j = 0; j < 32; j++) {
            ex_put(y, j, ex_mul((float) ex_i8(p + 2 + j), d));
        }
        break;
    }
    case 10: { // Q2_K: scales[16], qs[64], d, dmin
        float d = ex_f16(p + 80), mn = ex_f16(p + 82);
        int is = 0, at = 0;
        for (int n = 0; n < 256; n += 128) {
            const uint8_t *q = p + 16 + n / 4;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    unsigned sc = p[is++];
                    float dl = ex_mul(d, (float) (sc & 0xF)), ml = ex_mul(mn, (float) (sc >> 4));
                    for (int l = 0; l < 16; l++) {
                        ex_put(y, at++, __fsub_rn(ex_mul(dl, (float) ((q[16 * half + l] >> shift) & 3)), ml));
                    }
                }
            }
        }
        break;
    }
    case 11: { // Q3_K: hmask[32], qs[64], scales[12], d
        float dAll = ex_f16(p + 108);
        unsigned a0 = ex_u32(p + 96), a1 = ex_u32(p + 100), tmp = ex_u32(p + 104);
        const unsigned m1 = 0x03030303u, m2 = 0x0f0f0f0fu;
        unsigned aux[4] = {(a0 & m2) | ((tmp & m1) << 4), (a1 & m2) | (((tmp >> 2) & m1) << 4), ((a0 >> 4) & m2) | (((tmp >> 4) & m1) << 4),
                           ((a1 >> 4) & m2) | (((tmp >> 6) & m1) << 4)};
        int is = 0, at = 0;
        unsigned mask = 1;
        for (int n = 0; n < 256; n += 128) {
            const uint8_t *q = p + 32 + n / 4;
            for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
                for (int half = 0; half < 2; half++) {
                    int sc = (int) (signed char) (aux[is / 4] >> (8 * (is % 4)));
                    is++;
                    float dl = ex_mul(dAll, (float) (sc - 32));
                    for (int l = 0; l < 16; l++) {
                        int low = (q[16 * half + l] >> shift) & 3;
                        bool high = (p[16 * half + l] & mask) != 0;
                        ex_put(y, at++, ex_mul(dl, (float) (low - (high ? 0 : 4))));
                    }
                }
            }
        }
        break;
    }
    case 12:
    case 13: { // Q4_K / Q5_K: d, dmin, scales[12], [qh[32]], qs[128]
        bool five = t == 13;
        float d = ex_f16(p), mn = ex_f16(p + 2);
        const uint8_t *sc = p + 4, *qh = p + 16, *ql = p + (five ? 48 : 16);
        int at = 0;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, u1 <<= 2, u2 <<= 2) {
            float d1 = ex_mul(d, (float) ex_scale(sc, is)), mm1 = ex_mul(mn, (float) ex_min(sc, is));
            float d2 = ex_mul(d, (float) ex_scale(sc, is + 1)), mm2 = ex_mul(mn, (float) ex_min(sc, is + 1));
            const uint8_t *q = ql + j / 2;
            for (int l = 0; l < 32; l++) {
                int v = q[l] & 0xF;
                if (five) v += (qh[l] & u1) ? 16 : 0;
                ex_put(y, at++, __fsub_rn(ex_mul(d1, (float) v), mm1));
            }
            for (int l = 0; l < 32; l++) {
                int v = q[l] >> 4;
                if (five) v += (qh[l] & u2) ? 16 : 0;
                ex_put(y, at++, __fsub_rn(ex_mul(d2, (float) v), mm2));
            }
        }
        break;
    }
    case 14: { // Q6_K: ql[128], qh[64], scales[16] (int8), d
        float d = ex_f16(p + 208);
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = p + 64 * n, *qh = p + 128 + 32 * n, *sc = p + 192 + 8 * n;
            int base = 128 * n;
            for (int l = 0; l < 32; l++) {
                int is = l / 16, h = qh[l], a = ql[l], b = ql[l + 32];
                int q1 = ((a & 0xF) | ((h & 3) << 4)) - 32, q2 = ((b & 0xF) | (((h >> 2) & 3) << 4)) - 32;
                int q3 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32, q4 = ((b >> 4) | (((h >> 6) & 3) << 4)) - 32;
                ex_put(y, base + l, ex_mul(ex_mul(d, (float) ex_i8(sc + is)), (float) q1));
                ex_put(y, base + l + 32, ex_mul(ex_mul(d, (float) ex_i8(sc + is + 2)), (float) q2));
                ex_put(y, base + l + 64, ex_mul(ex_mul(d, (float) ex_i8(sc + is + 4)), (float) q3));
                ex_put(y, base + l + 96, ex_mul(ex_mul(d, (float) ex_i8(sc + is + 6)), (float) q4));
            }
        }
        break;
    }
    case 20: { // IQ4_NL
        float d = ex_f16(p);
        for (int j = 0; j < 16; j++) {
            unsigned q = p[2 + j];
            ex_put(y, j, ex_mul(d, (float) EX_IQ4[q & 0xF]));
            ex_put(y, j + 16, ex_mul(d, (float) EX_IQ4[q >> 4]));
        }
        break;
    }
    case 23: { // IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]
        float d = ex_f16(p);
        unsigned high = p[2] | (p[3] << 8);
        for (int ib = 0; ib < 8; ib++) {
            int ls = (int) (((p[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((high >> (2 * ib)) & 3) << 4));
            float dl = ex_mul(d, (float) (ls - 32));
            for (int j = 0; j < 16; j++) {
                unsigned q = p[8 + 16 * ib + j];
                ex_put(y, 32 * ib + j, ex_mul(dl, (float) EX_IQ4[q & 0xF]));
                ex_put(y, 32 * ib + j + 16, ex_mul(dl, (float) EX_IQ4[q >> 4]));
            }
        }
        break;
    }
    default:
        __trap();
    }
}

// out rows [row0, row0 + rows) of (_, cols) bf16 = the ggml blocks of type t in src (rows of rowBytes); grid (rows, ceil(blocks a
// row / 128)), block 128: a thread a block
extern "C" __global__ void expand_ggml(const uint8_t *src, long rowBytes, int t, int blockElements, int blockBytes, int rows, int cols, bf16 *out,
                                       int row0) {
    dependent_launch_entry();
    int row = blockIdx.x, b = blockIdx.y * blockDim.x + threadIdx.x;
    if (row >= rows || b * blockElements >= cols) {
        return;
    }
    ex_block(t, src + row * rowBytes + (long) b * blockBytes, out + (long) (row0 + row) * cols + (long) b * blockElements);
}

// a scale or bias of dtype kind (0 bf16, 1 f16, 2 f32) at index i
__device__ __forceinline__ float ex_float(const void *p, int kind, long i) {
    if (kind == 0) return __bfloat162float(((const bf16 *) p)[i]);
    if (kind == 1) return __half2float(((const __half *) p)[i]);
    return ((const float *) p)[i];
}

// MLX affine: out rows [row0, ..) = bf16(scale * q + bias) of each group of groupSize columns, the codes bits each in each row's
// little-endian u32 stream; grid (rows, ceil(groups a row / 128)), block 128: a thread a group
extern "C" __global__ void expand_mlx(const uint32_t *data, const void *scales, const void *biases, int kind, int groupSize, int bits, int rows,
                                      int cols, bf16 *out, int row0) {
    dependent_launch_entry();
    int row = blockIdx.x, g = blockIdx.y * blockDim.x + threadIdx.x, groups = cols / groupSize;
    if (row >= rows || g >= groups) {
        return;
    }
    long gi = (long) row * groups + g, base = (long) row * ((long) cols * bits / 32);
    float s = ex_float(scales, kind, gi), b = ex_float(biases, kind, gi);
    unsigned mask = (1u << bits) - 1u;
    bf16 *y = out + (long) (row0 + row) * cols;
    for (int j = g * groupSize; j < (g + 1) * groupSize; j++) {
        long bit = (long) j * bits, w = base + bit / 32;
        int shift = (int) (bit % 32);
        unsigned long long two = data[w] | (shift + bits > 32 ? (unsigned long long) data[w + 1] << 32 : 0ull);
        unsigned q = (unsigned) (two >> shift) & mask;
        y[j] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(s, (float) q), b));
    }
}

__constant__ float EX_E2M1[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};

// NVFP4: out rows [row0, ..) = bf16(e2m1(q) * t), t = e4m3(s) / global (divides) or e4m3(s) * global, a group of 16 columns;
// two codes a byte, the even column low; grid (rows, ceil(groups a row / 128)), block 128: a thread a group
extern "C" __global__ void expand_nvfp4(const uint8_t *data, const uint8_t *scales, float global, int divides, int rows, int cols, bf16 *out,
                                        int row0) {
    dependent_launch_entry();
    int row = blockIdx.x, g = blockIdx.y * blockDim.x + threadIdx.x, groups = cols / 16;
    if (row >= rows || g >= groups) {
        return;
    }
    float s = fp8_decode(scales[(long) row * groups + g]);
    float t = divides ? __fdiv_rn(s, global) : __fmul_rn(s, global);
    const uint8_t *q = data + (long) row * (cols / 2) + g * 8;
    bf16 *y = out + (long) (row0 + row) * cols + g * 16;
    for (int j = 0; j < 8; j++) {
        unsigned b = q[j];
        y[2 * j] = __float2bfloat16_rn(__fmul_rn(EX_E2M1[b & 0xF], t));
        y[2 * j + 1] = __float2bfloat16_rn(__fmul_rn(EX_E2M1[b >> 4], t));
    }
}

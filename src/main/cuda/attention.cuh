// attention.cuh: what the attention kernels share (attention.cu's mma.sync kernels, attention_wgmma.cu's
// Hopper prefill): the tile and split sizes, which fix every reduction's order, and the arithmetic of the
// fold, which every kernel must do identically (the bits of a row may not depend on the kernel).
#pragma once
#include "common.cuh"

#define KT 64
#define SPLIT 128

// two stages of K and V tiles: 2 * 2 * KT * HD bf16, then (prefill) the CTA's running O, fp32
extern __shared__ __align__(16) bf16 attn_smem[];

__device__ __forceinline__ void mma16816(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// the address a * b bytes past p, a and b 32-bit: one wide multiply-add (the compiler would widen a first)
__device__ __forceinline__ const void *mad_wide(unsigned a, unsigned b, const void *p) {
    unsigned long long r;
    asm("mad.wide.u32 %0, %1, %2, %3;\n" : "=l"(r) : "r"(a), "r"(b), "l"(p));
    return reinterpret_cast<const void *>(r);
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

// A stage's element offset of 16-byte chunk ch (dims 8 ch..) of key row r: rows of HD unpadded, chunk ch
// stored at ch ^ (r mod 8) (mod HD / 8 for narrower heads), so the eight rows an MMA fragment load or an
// ldmatrix reads at one chunk fall in eight different bank groups, with no padding in shared memory.
template <int HD>
__device__ __forceinline__ int swizzled(int r, int ch) {
    constexpr int MASK = (HD / 8 < 8 ? HD / 8 : 8) - 1;
    return r * HD + ((ch ^ (r & MASK)) << 3);
}

// Scores stay as the MMA gives them, fp32(q.k); the softmax works in powers of two: c = scale log2(e), a
// max m is kept as fp32(max s * c), and p = 2^(s c - m) is one FMA and one ex2 (FlashAttention's arithmetic,
// mathematically exp(scale s - scale max)). Every kernel computes c, p and the factors with these.
// The power of two is the GPU's ex2 (2 ulp, the accuracy of exp2f) with results under 2^-126 flushed to zero:
// a weight under 2^-126 of the row's largest (which is 1) changes no sum it enters.
__device__ __forceinline__ float attn_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float attn_c(float scale) { return __fmul_rn(scale, 1.4426950408889634f); }
__device__ __forceinline__ float attn_p(float s, float c, float m) { return attn_exp2(__fmaf_rn(s, c, -m)); }
// the factor taking a state of max older to the max newer (a state of max -inf has nothing in it: 0)
__device__ __forceinline__ float attn_factor(float older, float newer) { return older == -INFINITY ? 0.f : attn_exp2(__fsub_rn(older, newer)); }

// a value of the run after a split is folded in: O a + o b (o b rounded, then one FMA)
__device__ __forceinline__ float fold_value(float O, float a, float o, float b) {
    return __fmaf_rn(O, a, __fmul_rn(o, b));
}

// The fold of a split's state (ms, ls) into the running (M, L), in split order: the factors of the old
// state and of the split.
__device__ __forceinline__ void fold_factors(float &M, float &L, float ms, float ls, float &a, float &b) {
    float mn = fmaxf(M, ms);
    a = attn_factor(M, mn);
    b = attn_factor(ms, mn);
    L = fold_value(L, a, ls, b);
    M = mn;
}

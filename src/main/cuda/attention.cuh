// attention.cuh: what the attention kernels share (attention.cu's mma.sync kernels, attention_wgmma.cu's
// Hopper prefill): the tile and split sizes, which fix every reduction's order, and the arithmetic of the
// fold, which every kernel must do identically (the bits of a row may not depend on the kernel).
#pragma once
#include "common.cuh"

#define KT 64
// Splits (dev.spindle.backend.KeySplits): a split is 1/64 of its octave of key positions [2^e, 2^(e+1)) and
// at least SPLIT_MIN keys, so 128-key splits below SPLIT_FLAT = 16,384 keys, then 256 up to 32K, 512 up to 64K,
// ... (whole tiles, aligned to their size). Fixed by the keys alone, like every other boundary.
#define SPLIT_MIN 128
#define SPLIT_SHIFT 6
#define SPLIT_FLAT_LOG2 14
#define SPLIT_FLAT (1 << SPLIT_FLAT_LOG2)

// the split that holds key
__device__ __forceinline__ int split_of(int key) {
    if (key < SPLIT_FLAT) return (unsigned) key / SPLIT_MIN;
    const int e = 31 - __clz(key);
    return SPLIT_FLAT / SPLIT_MIN + ((e - SPLIT_FLAT_LOG2) << SPLIT_SHIFT) + ((key - (1 << e)) >> (e - SPLIT_SHIFT));
}
// the first key of split s
__device__ __forceinline__ int split_start(int s) {
    if (s < SPLIT_FLAT / SPLIT_MIN) return s * SPLIT_MIN;
    const int j = s - SPLIT_FLAT / SPLIT_MIN, e = SPLIT_FLAT_LOG2 + (j >> SPLIT_SHIFT);
    return (1 << e) + ((j & ((1 << SPLIT_SHIFT) - 1)) << (e - SPLIT_SHIFT));
}
// whether a split begins at key (a tile's first key)
__device__ __forceinline__ bool split_begins(int key) {
    const int size = key < SPLIT_FLAT ? SPLIT_MIN : 1 << (31 - __clz(key) - SPLIT_SHIFT);
    return (key & (size - 1)) == 0;
}

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

// A thread's two MMA rows, gr and gr + 8 of the 16 from m0 (MMA row m: window row m / G, query head
// g G + m % G): whether each holds a row, its position, and the Q fragments of both (16-wide k chunks,
// the A operand of the m16n8k16 MMA and of wgmma's register form alike).
template <int HD>
struct AttnRows {
    int mr[2], pos[2];
    bool valid[2];
    unsigned qf[HD / 16][4];

    __device__ __forceinline__ AttnRows(const bf16 *qkv, int qkvStride, int row0, int rows, int pos0, int g, int G, int m0, int gr, int tq) {
        const bf16 *qp[2];
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            int m = m0 + gr + 8 * h, r = m / G, j = m % G;
            valid[h] = r < rows;
            pos[h] = pos0 + r;
            mr[h] = m;
            qp[h] = qkv + (long) (row0 + (valid[h] ? r : 0)) * qkvStride + (long) (g * G + j) * HD;
        }
        #pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                qf[kk][h] = valid[h] ? *reinterpret_cast<const unsigned *>(qp[h] + 16 * kk + 2 * tq) : 0u;
                qf[kk][h + 2] = valid[h] ? *reinterpret_cast<const unsigned *>(qp[h] + 16 * kk + 8 + 2 * tq) : 0u;
            }
        }
    }
};

// The canonical tile sum of p of one row: this thread's quarter sums (16 keys each) in order, then the
// row's four lanes.
__device__ __forceinline__ float attn_tile_sum(const float (&q)[4]) {
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(q[0], q[1]), q[2]), q[3]);
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
    return __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
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

// A split's running maxima ms after a tile whose rows' maxima of raw scores are mx: the factors of the split's
// state before the tile (alpha) and the maxima p is taken against (mu: 0 while every key so far is masked).
// The second row only where it holds one (upper).
__device__ __forceinline__ void attn_new_max(float (&ms)[2], const float (&mx)[2], float c, bool upper, float (&mu)[2], float (&alpha)[2]) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        mu[h] = 0.f;
        alpha[h] = 1.f;
        if (h == 1 && !upper) break;
        float mn = fmaxf(ms[h], __fmul_rn(mx[h], c));
        mu[h] = mn == -INFINITY ? 0.f : mn;
        alpha[h] = attn_factor(ms[h], mu[h]);
        ms[h] = mn;
    }
}

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

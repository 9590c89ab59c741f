// attention: causal attention over the paged bf16 KV pool on tensor cores (mma.sync m16n8k16 bf16,
// fp32 accumulation), for prefill windows and decode rows alike, in HF's eager numerics:
//   s = bf16(bf16(q.k) * scale), masked keys -inf; p = bf16(exp(s - max) / sum) (the softmax in fp32,
//   rounded to bf16 as HF's softmax(...).to(bf16)); out = bf16(sum of p v, fp32 accumulation).
// Because p is normalised before its rounding, the kernel makes two passes over the keys: pass 1
// the row max and sum, pass 2 the products with V.
//
// One kernel per head dim and phase (attention_hd{16,32,64,128}_p{0,1,2}), and p0h: phase 0 staging half
// tiles (32 keys of K and V a stage: 68 KiB of shared memory instead of 100, so three CTAs share an SM
// instead of two), and p0w: phase 0 with two warps per 16 MMA rows (below), both computing the same
// values as p0. Grid: (CTAs, kvHeads), block: 128 threads (4 warps; p0w 256, 8 warps). The G query
// heads of one KV head and R rows stack into the 64 rows of the MMA tile (m = r * G + j), so K/V
// tiles are read once per KV head. Each CTA is described by 8 ints in desc:
//   [0] first qkv row of its rows, [1] rows (R <= 64 / G, G = heads / kvHeads), [2] position of the
//   first row, [3] offset of its sequence's block table in tables, [4] first split, [5] end split,
//   [6] partial slot of split s0 (-1: the CTA walks every split of its rows itself and writes out),
//   [7] decode row index (its row of stats).
// phase 0: both passes, out written (prefill windows). Decode rows (one row per sequence) run CTAs
// that each take a run of splits [s0, s1) of one row and write every split's state on its own, at
// slot part + (s - s0): phase 1 each split's (max, sum) to partML; attention_stats merges a row's
// split states in split order (as phase 0 does) into stats; phase 2 writes each split's sum of p v
// (p with the merged max and sum) to partO; attention_sum adds the splits' partO in split order.
// Phase 1 keeps its scores in sbuf (slot, query head, SPLIT keys; bf16 values, so exact) and phase 2
// reads them back instead of K: it streams only V.
//
// Keys are cut into fixed splits of SPLIT keys, walked in tiles of KT keys; the order of every
// reduction is fixed by the keys alone (never by the batch, the window or the CTA), and keys past a
// row's position contribute exact zeros, so a decode step equals the same row inside any window.
// A tile's sum of exp is canonical: per thread, each quarter of the tile's keys (16 keys, nt 2Q and
// 2Q + 1) is summed in order, the quarters are added in order, then the row's four lanes.
// Phase 0 (prefill) gives each warp 16 rows and whole tiles. The decode phases have one row (at most
// 16 MMA rows) per CTA, so all four warps share those rows and split every tile: warp Q computes
// quarter Q's scores, exp sums (phase 1) and P fragment (phase 2); the quarters' maxima, sums and
// fragments meet in shared memory, and in phase 2 each warp multiplies all of P by its quarter of
// V's columns. p0w splits the same way with two warps per 16 rows (each half a tile's keys and half
// the dims), which halves each warp's dependent chain and doubles the warps an SM holds: phase 0 is
// bound by the latency of that chain (ncu on the H200: 1.3 warps per scheduler, an instruction every
// 3.4 cycles). Every value is computed by the same arithmetic as phase 0's, only by other threads.
#include "common.cuh"

#define KT 64
#define SPLIT 128

// two stages of K and V tiles (K only for phase 1): 2 * 2 * KT * (HD + 8) bf16, the launch's dynamic shared memory
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

// Merges a split's (max, sum) into the running one, in split order.
__device__ __forceinline__ void merge_stats(float &M, float &L, float ms, float ls) {
    float mn = fmaxf(M, ms);
    float a = M == -INFINITY ? 0.f : expf(__fsub_rn(M, mn)), b = ms == -INFINITY ? 0.f : expf(__fsub_rn(ms, mn));
    L = __fadd_rn(__fmul_rn(L, a), __fmul_rn(ls, b));
    M = mn;
}

// The p that HF computes, exp(s - M) / L rounded to bf16, returned as the fp32 quotient whose bf16
// rounding is HF's. Fast path: q = e * (1 / L) is within 3 fp32 steps of the correctly rounded quotient
// (two roundings of relative error 2^-24 each), and rounding to bf16 is monotone, so q rounds to the
// same bf16 unless a rounding tie (low 16 bits 0x8000) lies within 3 steps of q; then the exact
// quotient decides (about 1 in 9,000 values). e is in [0, 1] and L >= 1, so q never overflows.
__device__ __forceinline__ float p_quotient(float e, float L, float rl) {
    float q = __fmul_rn(e, rl);
    if ((__float_as_uint(q) & 0xFFFFu) - 0x7FFDu <= 6u) q = __fdiv_rn(e, L);
    return q;
}

// Warps that share 16 MMA rows (a row group) split each tile's keys and meet at this barrier: one
// named barrier per group (ids 1..RG, immediates, so the kernel reserves only those), so groups
// without rows (a window's last CTA) never wait on it.
template <int WG, int RG>
__device__ __forceinline__ void group_sync(int grp) {
    if (RG == 1 || grp == 0) asm volatile("bar.sync 1, %0;\n" :: "n"(32 * WG) : "memory");
    else if (grp == 1) asm volatile("bar.sync 2, %0;\n" :: "n"(32 * WG) : "memory");
    else if (grp == 2) asm volatile("bar.sync 3, %0;\n" :: "n"(32 * WG) : "memory");
    else asm volatile("bar.sync 4, %0;\n" :: "n"(32 * WG) : "memory");
}

template <int HD, int PHASE, bool HALF, int WG0>
__device__ __forceinline__ void attention_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        float *partO, float *partML, const float *stats, bf16 *sbuf, int heads, int kvHeads, int blockSize, float scale) {
    constexpr int LDS = HD + 8, KS = HD / 16, DN = HD / 8;
    // keys per stage: phase 0 stages K and V, of whole tiles or (HALF) of half tiles, which keeps its shared
    // memory small enough for three CTAs per SM instead of two; the decode phases stage whole tiles,
    // phase 1 only K, phase 2 only V and the tile's scores from phase 1 (16 query heads x KT keys, after V)
    constexpr int HALVES = PHASE == 0 && HALF ? 2 : 1, KH = KT / HALVES;
    constexpr int STAGE = (PHASE == 0 ? 2 : 1) * KH * LDS + (PHASE == 2 ? 16 * KT : 0);
    const int *d = desc + blockIdx.x * 8;
    const int row0 = d[0], rows = d[1], pos0 = d[2], tab = d[3], s0 = d[4], s1 = d[5], part = d[6], drow = d[7];
    // the descriptor is the step's plan, read before the wait (see common.cuh); the rest follows it
    dependent_launch_entry();
    const int g = blockIdx.y, G = heads / kvHeads;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
    const int maxPos = pos0 + rows - 1;
    // WG warps share a row group of 16 MMA rows and split each tile: warp wq of the group takes key groups
    // nt0.. (NT of the tile's 8) and dims dn0.. (DNW of DN). The decode phases: one group of four warps
    // (one row's query heads); phase 0: four groups (rows 16 grp..) of WG0 warps each.
    constexpr int WG = PHASE != 0 ? 4 : WG0, RG = PHASE != 0 ? 1 : 4, THREADS = 32 * WG * RG;
    constexpr bool QW = WG > 1;
    constexpr int NT = 8 / WG, DNW = DN >= WG ? DN / WG : 1;
    const int wq = warp % WG, grp = warp / WG;
    const int nt0 = NT * wq, dn0 = wq * DNW;
    const bool pvWarp = dn0 < DN;
    // this thread's two MMA rows
    int mr[2], pos[2];
    bool valid[2];
    const bf16 *qp[2];
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        int m = grp * 16 + gr + 8 * h, r = m / G, j = m % G;
        valid[h] = r < rows;
        pos[h] = pos0 + r;
        mr[h] = m;
        qp[h] = qkv + (long) (row0 + (valid[h] ? r : 0)) * qkvStride + (long) (g * G + j) * HD;
    }
    const bool warpActive = grp * 16 < rows * G;
    // whether the warp's upper 8 MMA rows (h = 1) hold a row: not in a decode CTA of G <= 8 query heads per KV
    // head (the Nanbeige models have 7 and 5), where the half of every exp, sum and p of those rows is skipped
    const bool upper = grp * 16 + 8 < rows * G;
    // split tiles (QW): the warps' tile maxima, then each quarter's exp sums (pass 1) and each 16-key P
    // fragment (pass 2), exchanged within the group (xch: [group][quarter or fragment][lane][4 words])
    __shared__ float qmax[QW ? RG * WG : 1][16];
    __shared__ unsigned xch[QW ? RG * 4 * 32 * 4 : 1];
    unsigned qf[KS][4];
    #pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            qf[kk][h] = valid[h] ? *reinterpret_cast<const unsigned *>(qp[h] + 16 * kk + 2 * tq) : 0u;
            qf[kk][h + 2] = valid[h] ? *reinterpret_cast<const unsigned *>(qp[h] + 16 * kk + 8 + 2 * tq) : 0u;
        }
    }
    // a block of the pool holds K then V of every KV head, blockSize rows of HD each (a power of two, checked
    // by the host). This thread copies the 16 bytes at dims dim8.. of keys lk, lk + KSTEP, .. of each
    // stage (a warp's copies cover whole rows). A key's row is numbered in 32 bits (the host keeps a layer's
    // pool under 2^32 rows), so its address is one wide multiply-add, and the loop has a constant trip count.
    constexpr int KSTEP = THREADS / DN;
    const int lk = threadIdx.x / DN, dim8 = (threadIdx.x % DN) * 8, bsh = __ffs(blockSize) - 1;
    const unsigned blockRows = 2u * kvHeads * blockSize, headRow = (unsigned) g * blockSize, vRows = (unsigned) kvHeads * blockSize;
    const bf16 *column = pool + dim8, *vColumn = column + (long) vRows * HD;
    const int *table = tables + tab;
    const int firstKey = s0 * SPLIT, lastKey = min(s1 * SPLIT, maxPos + 1);
    const int tiles = lastKey > firstKey ? (lastKey - firstKey + KT - 1) / KT : 0;
    // K (and in pass 2 V) stream through two shared-memory stages with cp.async: the next stage loads
    // while this one computes. Whole tiles: stage i & 1 holds tile i. Half tiles: stage h holds half h of
    // the current tile (keys t0 + KH h ..), so half 1 loads during half 0 and the next tile's half 0 during half 1.
    auto stageOf = [&](int i, int half) { return attn_smem + (HALVES == 2 ? half : (i & 1)) * STAGE; };
    auto load = [&](int i, int half, bool withV) {
        bf16 *Ks = stageOf(i, half), *Vs = PHASE == 2 ? Ks : Ks + KH * LDS;
        const int t0 = firstKey + i * KT, k0 = t0 + half * KH + lk;
        const unsigned dk = (unsigned) __cvta_generic_to_shared(Ks + lk * LDS + dim8);
        const unsigned dv = (unsigned) __cvta_generic_to_shared(Vs + lk * LDS + dim8);
        #pragma unroll
        for (int key = 0; key < KH; key += KSTEP) {
            if (KSTEP > KH && lk >= KH) break;
            const int kj = k0 + key;
            // past the row's last key: a copy of 0 bytes that fills the 16 with zeros (V must stay finite)
            const bool in = kj < lastKey;
            const unsigned row = in ? __ldg(static_cast<const unsigned *>(mad_wide(kj >> bsh, 4, table))) * blockRows + headRow + (kj & (blockSize - 1)) : 0u;
            const int bytes = in ? 16 : 0;
            if (PHASE != 2) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dk + key * LDS * 2), "l"(mad_wide(row, 2 * HD, column)), "r"(bytes));
            }
            if (withV) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dv + key * LDS * 2), "l"(mad_wide(row, 2 * HD, vColumn)), "r"(bytes));
            }
        }
        if (PHASE == 2 && threadIdx.x < G * (KT / 8)) {
            // the tile's scores from phase 1: G query heads x KT keys, 16 bytes per thread
            int j = threadIdx.x / (KT / 8), c8 = (threadIdx.x % (KT / 8)) * 8;
            const bf16 *src = sbuf + ((long) (part + t0 / SPLIT - s0) * heads + g * G + j) * SPLIT + t0 % SPLIT + c8;
            unsigned ds = (unsigned) __cvta_generic_to_shared(Vs + KT * LDS + j * KT + c8);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(ds), "l"(src));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    // waits for tile i's stage (half tiles: half `half`) after starting the next load: the same tile's
    // second half (half tiles), else the next tile's first stage
    auto arrive = [&](int i, int half, bool withV) {
        const bool nextHalf = HALVES == 2 && half == 0;
        if (nextHalf || i + 1 < tiles) {
            load(nextHalf ? i : i + 1, nextHalf ? 1 : 0, withV);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        __syncthreads();
    };
    // scores of one tile for this warp's 16 rows and key groups nt0..nt0+NT-1: S[c][e] for keys
    // t0 + 8 (nt0 + c) + 2 tq + (e & 1), rows gr (+8 for e >= 2). Half tiles: one half at a time
    // (c in [4 half, 4 half + 4), its stage's rows start at key 32 half); whole tiles pass half -1.
    auto scores = [&](const bf16 (*Ks)[LDS], int t0, float (*S)[4], int half) {
        #pragma unroll
        for (int c = 0; c < NT; c++) {
            if (HALVES == 2 && (c >> 2) != half) continue;
            const int nt = nt0 + c, kr = 8 * nt - (HALVES == 2 ? KH * half : 0);
            #pragma unroll
            for (int e = 0; e < 4; e++) S[c][e] = 0.f;
            #pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                unsigned b0 = *reinterpret_cast<const unsigned *>(&Ks[kr + gr][16 * kk + 2 * tq]);
                unsigned b1 = *reinterpret_cast<const unsigned *>(&Ks[kr + gr][16 * kk + 8 + 2 * tq]);
                mma16816(S[c], qf[kk], b0, b1);
            }
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int h = e >> 1, key = t0 + 8 * nt + 2 * tq + (e & 1);
                if (h == 1 && !upper) {
                    S[c][e] = -INFINITY;
                    continue;
                }
                float v = rnd(__fmul_rn(rnd(S[c][e]), scale));
                S[c][e] = (valid[h] && key <= pos[h]) ? v : -INFINITY;
            }
        }
    };

    // pass 1: each split's max and sum of exp, merged in split order (phases 0 and 1)
    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f};
    if constexpr (PHASE != 2) {
        float ms[2], ls[2];
        if (tiles > 0) load(0, 0, false);
        for (int i = 0; i < tiles; i++) {
            const int t0 = firstKey + i * KT;
            float S[NT][4];
            if constexpr (HALVES == 2) {
                #pragma unroll
                for (int half = 0; half < 2; half++) {
                    arrive(i, half, false);
                    if (warpActive) scores(reinterpret_cast<const bf16 (*)[LDS]>(stageOf(i, half)), t0, S, half);
                    __syncthreads(); // the stage is free for the load after next
                }
            } else {
                arrive(i, 0, false);
            }
            if (t0 % SPLIT == 0) {
                ms[0] = ms[1] = -INFINITY;
                ls[0] = ls[1] = 0.f;
            }
            if (warpActive) {
                if constexpr (HALVES == 1) scores(reinterpret_cast<const bf16 (*)[LDS]>(stageOf(i, 0)), t0, S, -1);
                if constexpr (PHASE == 1) {
                    // keep the scores (bf16 values, so exact) for phase 2
                    #pragma unroll
                    for (int h = 0; h < 2; h++) {
                        if (!valid[h]) continue;
                        bf16 *sp = sbuf + ((long) (part + t0 / SPLIT - s0) * heads + g * G + mr[h] % G) * SPLIT + t0 % SPLIT + 2 * tq;
                        #pragma unroll
                        for (int c = 0; c < NT; c++) {
                            *reinterpret_cast<__nv_bfloat162 *>(sp + 8 * (nt0 + c)) = __floats2bfloat162_rn(S[c][2 * h], S[c][2 * h + 1]);
                        }
                    }
                }
                float mx[2] = {-INFINITY, -INFINITY};
                #pragma unroll
                for (int c = 0; c < NT; c++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], S[c][e]);
                }
                #pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (h == 1 && !upper) break;
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                }
                if constexpr (QW) {
                    // the tile's max over the group's warps (exact in any order)
                    if (tq == 0) {
                        qmax[warp][gr] = mx[0];
                        qmax[warp][gr + 8] = mx[1];
                    }
                    group_sync<WG, RG>(grp);
                    #pragma unroll
                    for (int h = 0; h < 2; h++) {
                        #pragma unroll
                        for (int w = 0; w < WG; w++) mx[h] = fmaxf(mx[h], qmax[grp * WG + w][gr + 8 * h]);
                    }
                }
                float mn[2] = {-INFINITY, -INFINITY}, mu[2] = {0.f, 0.f}, q[2][4] = {};
                #pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (h == 1 && !upper) break;
                    mn[h] = fmaxf(ms[h], mx[h]);
                    mu[h] = mn[h] == -INFINITY ? 0.f : mn[h];
                    // this thread's sums of exp over each quarter of the tile's keys (nt 2Q, 2Q + 1), in order
                    #pragma unroll
                    for (int c = 0; c < NT; c += 2) {
                        float a = expf(__fsub_rn(S[c][2 * h], mu[h]));
                        a = __fadd_rn(a, expf(__fsub_rn(S[c][2 * h + 1], mu[h])));
                        a = __fadd_rn(a, expf(__fsub_rn(S[c + 1][2 * h], mu[h])));
                        q[h][c / 2] = __fadd_rn(a, expf(__fsub_rn(S[c + 1][2 * h + 1], mu[h])));
                    }
                }
                if constexpr (QW) {
                    float *qs = reinterpret_cast<float *>(xch) + grp * 4 * 32 * 4;
                    #pragma unroll
                    for (int c = 0; c < NT / 2; c++) {
                        qs[((nt0 / 2 + c) * 32 + lane) * 4] = q[0][c];
                        qs[((nt0 / 2 + c) * 32 + lane) * 4 + 1] = q[1][c];
                    }
                    group_sync<WG, RG>(grp);
                    #pragma unroll
                    for (int h = 0; h < 2; h++) {
                        #pragma unroll
                        for (int w = 0; w < 4; w++) q[h][w] = qs[(w * 32 + lane) * 4 + h];
                    }
                }
                #pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (h == 1 && !upper) break;
                    // the canonical tile sum: quarters in order, then the row's four lanes
                    float sum = __fadd_rn(__fadd_rn(__fadd_rn(q[h][0], q[h][1]), q[h][2]), q[h][3]);
                    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
                    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
                    ls[h] = __fadd_rn(__fmul_rn(ls[h], expf(__fsub_rn(ms[h], mu[h]))), sum);
                    ms[h] = mn[h];
                }
            }
            if constexpr (HALVES == 1) __syncthreads(); // stage i & 1 is free for tile i + 2 (half tiles synced after each half)
            if (!warpActive || !((t0 + KT) % SPLIT == 0 || i == tiles - 1)) continue;
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                if constexpr (PHASE == 1) {
                    if (valid[h] && tq == 0 && wq == 0) {
                        long po = (long) (part + t0 / SPLIT - s0) * heads + g * G + mr[h] % G;
                        partML[po * 2] = ms[h];
                        partML[po * 2 + 1] = ls[h];
                    }
                } else if (t0 / SPLIT == s0) {
                    M[h] = ms[h];
                    L[h] = ls[h];
                } else {
                    merge_stats(M[h], L[h], ms[h], ls[h]);
                }
            }
        }
    } else {
        // the row's (max, sum), merged from its splits' states by attention_stats
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            if (valid[h]) {
                long si = (long) drow * heads + g * G + mr[h] % G;
                M[h] = stats[si * 2];
                L[h] = stats[si * 2 + 1];
            }
        }
    }

    if constexpr (PHASE != 1) {
    // pass 2: each split's sum of p v with p = bf16(exp(s - M) / L), the splits added in split order
    // phase 0 keeps the splits' running sum of p v in shared memory after the stages (this thread's
    // slots q * 128 + thread), which leaves the registers to the split's own sum
    float os[DNW][4];
    float *orun = reinterpret_cast<float *>(attn_smem + 2 * STAGE);
    // 1 / L for the quotient's fast path (see p_bf16)
    const float rl[2] = {__frcp_rn(L[0]), __frcp_rn(L[1])};
    if (tiles > 0) load(0, 0, true);
    for (int i = 0; i < tiles; i++) {
        const int t0 = firstKey + i * KT;
        if (t0 % SPLIT == 0) {
            #pragma unroll
            for (int dn = 0; dn < DNW; dn++) for (int e = 0; e < 4; e++) os[dn][e] = 0.f;
        }
        // half tiles: the tile's two halves in turn (P and its products with V for 32 keys each)
        #pragma unroll
        for (int half = 0; half < HALVES; half++) {
        arrive(i, half, true);
        if (warpActive) {
            const bf16 (*Ks)[LDS] = reinterpret_cast<const bf16 (*)[LDS]>(stageOf(i, half));
            const bf16 (*Vs)[LDS] = PHASE == 2 ? Ks : Ks + KH;
            float S[NT][4];
            if constexpr (PHASE == 2) {
                #pragma unroll
                for (int h = 0; h < 2; h++) {
                    const bf16 *sp = &Vs[KT][0] + (mr[h] % G) * KT + 2 * tq;
                    #pragma unroll
                    for (int c = 0; c < NT; c++) {
                        float2 v = valid[h] ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(sp + 8 * (nt0 + c)))
                                            : make_float2(-INFINITY, -INFINITY);
                        S[c][2 * h] = v.x;
                        S[c][2 * h + 1] = v.y;
                    }
                }
            } else {
                scores(Ks, t0, S, HALVES == 2 ? half : -1);
            }
            // P as the MMA's A fragments: pf[j] covers keys 16j..16j+15 (nt 2j, 2j + 1)
            unsigned pf[4][4];
            #pragma unroll
            for (int c = 0; c < NT; c++) {
                if (HALVES == 2 && (c >> 2) != half) continue;
                float p[4];
                #pragma unroll
                for (int e = 0; e < 4; e++) p[e] = e >= 2 && !upper ? 0.f : p_quotient(expf(__fsub_rn(S[c][e], M[e >> 1])), L[e >> 1], rl[e >> 1]);
                pf[c >> 1][(c & 1) * 2] = pack_bf16(p[0], p[1]);
                pf[c >> 1][(c & 1) * 2 + 1] = pack_bf16(p[2], p[3]);
            }
            if constexpr (QW) {
                // each warp made the fragments of its key groups; every warp needs all four for its dims
                unsigned *qf4 = xch + grp * 4 * 32 * 4;
                #pragma unroll
                for (int c = 0; c < NT / 2; c++) {
                    #pragma unroll
                    for (int r = 0; r < 4; r++) qf4[((nt0 / 2 + c) * 32 + lane) * 4 + r] = pf[c][r];
                }
                group_sync<WG, RG>(grp);
                #pragma unroll
                for (int j = 0; j < 4; j++) {
                    #pragma unroll
                    for (int r = 0; r < 4; r++) pf[j][r] = qf4[(j * 32 + lane) * 4 + r];
                }
            }
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                if (HALVES == 2 && (j >> 1) != half) continue;
                // A operand from P: rows gr / gr+8, keys 16j + 2tq (+8); B from V through ldmatrix.trans
                unsigned a[4] = {pf[j][0], pf[j][1], pf[j][2], pf[j][3]};
                #pragma unroll
                for (int c = 0; c < DNW; c++) {
                    const int dn = dn0 + c;
                    if (!pvWarp) break;
                    unsigned b0, b1;
                    unsigned sa = (unsigned) __cvta_generic_to_shared(&Vs[16 * j - (HALVES == 2 ? KH * half : 0) + (lane & 15)][8 * dn]);
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(sa));
                    mma16816(os[c], a, b0, b1);
                }
            }
        }
        __syncthreads();
        }
        if (!warpActive || !((t0 + KT) % SPLIT == 0 || i == tiles - 1)) continue;
        if constexpr (PHASE == 2) {
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                if (!valid[h]) continue;
                long po = (long) (part + t0 / SPLIT - s0) * heads + g * G + mr[h] % G;
                #pragma unroll
                for (int c = 0; c < DNW; c++) {
                    if (!pvWarp) break;
                    partO[po * HD + 8 * (dn0 + c) + 2 * tq] = os[c][2 * h];
                    partO[po * HD + 8 * (dn0 + c) + 2 * tq + 1] = os[c][2 * h + 1];
                }
            }
        } else {
            const bool firstSplit = t0 / SPLIT == s0;
            #pragma unroll
            for (int c = 0; c < DNW; c++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    float *o = orun + (c * 4 + e) * THREADS + threadIdx.x;
                    *o = firstSplit ? os[c][e] : __fadd_rn(*o, os[c][e]);
                }
            }
        }
    }
    if constexpr (PHASE == 0) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        if (!valid[h] || !warpActive) continue;
        int r = mr[h] / G, qh = g * G + mr[h] % G;
        bf16 *op = out + (long) (row0 + r) * heads * HD + (long) qh * HD;
        #pragma unroll
        for (int c = 0; c < DNW; c++) {
            float o0 = orun[(c * 4 + 2 * h) * THREADS + threadIdx.x], o1 = orun[(c * 4 + 2 * h + 1) * THREADS + threadIdx.x];
            *reinterpret_cast<__nv_bfloat162 *>(op + 8 * (dn0 + c) + 2 * tq) = __floats2bfloat162_rn(o0, o1);
        }
    }
    }
    }
}

#define ATTENTION(hd, phase, name, half, wg) \
    extern "C" __global__ void __launch_bounds__(phase == 0 ? 128 * wg : 128) attention_hd##hd##_##name( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, const float *stats, bf16 *sbuf, int heads, int kvHeads, int blockSize, float scale) { \
        attention_impl<hd, phase, half, wg>(qkv, qkvStride, out, pool, tables, desc, partO, partML, stats, sbuf, heads, kvHeads, blockSize, scale); \
    }
#define ATTENTION_PHASES(hd) ATTENTION(hd, 0, p0, false, 1) ATTENTION(hd, 0, p0h, true, 1) ATTENTION(hd, 1, p1, false, 4) \
    ATTENTION(hd, 2, p2, false, 4) ATTENTION(hd, 0, p0w, false, 2)
ATTENTION_PHASES(16)
ATTENTION_PHASES(32)
ATTENTION_PHASES(64)
ATTENTION_PHASES(128)

// attention_stats: merges each decode row's split (max, sum) states in split order into stats
// (rows, heads, 2), with exactly merge_stats's arithmetic. Grid: (decode rows, heads), block: 32.
// The running max is a prefix max (exact in any order), so every split's two factors
// a = exp(M_before - M_after), b = exp(m_split - M_after) are computed by the lanes in parallel;
// only L = L * a + l_split * b runs split after split. The states are read STATS_AHEAD chunks of 32
// at a time (all their loads in flight together). cdesc per row: [first slot, splits, output row].
#define STATS_AHEAD 8
extern "C" __global__ void attention_stats(const float *partML, const int *cdesc, float *stats, int heads) {
    __shared__ float fa[32], ft[32];
    const int *d = cdesc + blockIdx.x * 3;
    const int first = d[0], n = d[1], qh = blockIdx.y, lane = threadIdx.x;
    dependent_launch_entry();
    float M = -INFINITY, L = 0.f;
    for (int g = 0; g < n; g += 32 * STATS_AHEAD) {
        float gm[STATS_AHEAD], gl[STATS_AHEAD];
        #pragma unroll
        for (int c = 0; c < STATS_AHEAD; c++) {
            int j = g + 32 * c + lane;
            gm[c] = -INFINITY;
            gl[c] = 0.f;
            if (j < n) {
                long ps = (long) (first + j) * heads + qh;
                gm[c] = partML[ps * 2];
                gl[c] = partML[ps * 2 + 1];
            }
        }
        #pragma unroll
        for (int c = 0; c < STATS_AHEAD; c++) {
            int b = g + 32 * c;
            if (b >= n) break;
            int cnt = min(32, n - b);
            float ms = gm[c], ls = gl[c], pm = ms;
            #pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                float t = __shfl_up_sync(0xffffffffu, pm, off);
                if (lane >= off) pm = fmaxf(pm, t);
            }
            float after = fmaxf(M, pm), before = __shfl_up_sync(0xffffffffu, after, 1);
            if (lane == 0) before = M;
            fa[lane] = before == -INFINITY ? 0.f : expf(__fsub_rn(before, after));
            ft[lane] = __fmul_rn(ls, ms == -INFINITY ? 0.f : expf(__fsub_rn(ms, after)));
            __syncwarp();
            if (lane == 0) {
                for (int k = 0; k < cnt; k++) L = __fadd_rn(__fmul_rn(L, fa[k]), ft[k]);
            }
            __syncwarp();
            M = __shfl_sync(0xffffffffu, after, cnt - 1);
        }
    }
    if (lane == 0) {
        stats[((long) blockIdx.x * heads + qh) * 2] = M;
        stats[((long) blockIdx.x * heads + qh) * 2 + 1] = L;
    }
}

// attention_sum: out = bf16 of the decode rows' split sums of p v added in split order.
// Grid: (decode rows, heads), block: headDim (one thread per dim). The splits' sums stream through
// SUM_STAGES shared-memory stages of SUM_CHUNK splits with cp.async (loads in flight without
// registers); each thread then adds its dim down the chunk in split order.
#define SUM_CHUNK 32
#define SUM_STAGES 3
extern "C" __global__ void attention_sum(const float *partO, const int *cdesc, bf16 *out, int heads, int HD) {
    __shared__ __align__(16) float buf[SUM_STAGES][SUM_CHUNK * 128];
    const int *d = cdesc + blockIdx.x * 3;
    const int first = d[0], n = d[1], row = d[2], qh = blockIdx.y, i = threadIdx.x;
    dependent_launch_entry();
    const int chunks = (n + SUM_CHUNK - 1) / SUM_CHUNK, q = HD / 4;
    auto load = [&](int c) {
        if (c < chunks) {
            int s0 = c * SUM_CHUNK, cnt = min(SUM_CHUNK, n - s0);
            for (int e = i; e < cnt * q; e += HD) {
                int s = e / q, part = e % q;
                const float *src = partO + ((long) (first + s0 + s) * heads + qh) * HD + 4 * part;
                unsigned dst = (unsigned) __cvta_generic_to_shared(&buf[c % SUM_STAGES][s * HD + 4 * part]);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    #pragma unroll
    for (int c = 0; c < SUM_STAGES - 1; c++) load(c);
    float O = 0.f;
    for (int c = 0; c < chunks; c++) {
        load(c + SUM_STAGES - 1);
        asm volatile("cp.async.wait_group %0;\n" :: "n"(SUM_STAGES - 1));
        __syncthreads();
        const float *b = buf[c % SUM_STAGES];
        int cnt = min(SUM_CHUNK, n - c * SUM_CHUNK);
        for (int s = 0; s < cnt; s++) O = c == 0 && s == 0 ? b[i] : __fadd_rn(O, b[s * HD + i]);
        __syncthreads(); // the stage is loaded again SUM_STAGES - 1 chunks later
    }
    out[(long) row * heads * HD + (long) qh * HD + i] = __float2bfloat16_rn(O);
}

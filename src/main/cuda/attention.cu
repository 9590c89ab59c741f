// attention: causal attention over the paged bf16 KV pool on tensor cores (mma.sync m16n8k16 bf16,
// fp32 accumulation), for prefill windows and decode rows alike, in one pass over the keys, in
// Spindle's flash numerics (docs/KERNELS.md, "Attention numerics"; the arithmetic is attention.cuh's,
// the CPU twin is backend/cpu/PagedAttention):
//   s = fp32(q.k) (never rounded or scaled), masked keys -inf; c = scale log2(e). Keys are cut into fixed
//   splits (attention.cuh: 128 keys below 16K, then 1/64 of their octave) walked in tiles of KT keys. In a
//   split, an online softmax in powers of two: per tile the running max m grows to m' = max(m, fp32(tile
//   max * c)), the split's sum l and its unnormalised sum o of p v are rescaled by 2^(m - m'), p =
//   2^fma(s, c, -m') in fp32 adds to l (the canonical tile sum below) and, rounded to bf16, to o through
//   the MMA. The splits fold in split order:
//   M' = max(M, m), a = 2^(M - M'), b = 2^(m - M'), L = fma(L, a, l b), O = fma(O, a, o b); out = bf16(O / L).
// On sm_90a prefill runs attention_wgmma.cu's kernel instead of p0, with the same bits.
// One kernel per head dim and kind (attention_hd{16,32,64,128}_{p0,p1,prefill_warp_pairs}). Grid: (CTAs, kvHeads),
// block: 128 threads (4 warps; prefill_warp_pairs 256, 8 warps). The G query heads of one KV head and R rows stack into
// the 64 rows of the MMA tile (m = r * G + j), so K/V tiles are read once per KV head. Each CTA is
// described by 8 ints in desc:
//   [0] first qkv row of its rows, [1] rows (R <= 64 / G, G = heads / kvHeads; 128 / G for attention_ws.cu's), [2] position of the
//   first row, [3] offset of its sequence's block table in tables, [4] first split, [5] end split,
//   [6] partial slot of split s0 (decode CTAs; -1: the CTA walks all of its row's splits and folds them itself, as
//   prefill does), [7] the decode row (written by StepPlan, read by no kernel).
// p0 and prefill_warp_pairs (prefill windows) walk every split of their rows and fold them in the CTA, O in shared
// memory after the stages, and write out. p1 (decode rows, one row per CTA) takes a run of splits
// [s0, s1) of one row and writes every split's state on its own, (m, l) to partML and o to partO at
// slot part + (s - s0); attention_merge folds a row's split states in split order with the same
// arithmetic and writes out. A p1 CTA without a partial slot walks all of its row's splits and folds
// them itself, as p0 does (the merge skips that row).
//
// The order of every reduction is fixed by the keys alone (never by the batch, the window or the CTA),
// and keys past a row's position contribute exact zeros (a split past it is an exact no-op of the
// fold: b = 0, a = 1), so a decode step equals the same row inside any window.
// A tile's sum of p is canonical: per thread, each quarter of the tile's keys (16 keys, nt 2Q and
// 2Q + 1) is summed in order, the quarters are added in order, then the row's four lanes.
// p0 gives each warp 16 rows and whole tiles. p1 has one row (at most 16 MMA rows) per CTA, so all four
// warps share those rows and split every tile: warp Q computes quarter Q's scores, p and quarter sum; the
// quarters' maxima, sums and P fragments meet in shared memory, and each warp multiplies all of P by
// its quarter of V's columns. prefill_warp_pairs splits the same way with two warps per 16 rows (each half a tile's keys
// and half the dims), which halves each warp's dependent chain and doubles the warps an SM holds. Every
// value is computed by the same arithmetic in every kernel, only by other threads.
//
// The _kv8 twins of prefill, decode and prefill_warp_pairs read an fp8 pool (--kv-cache-dtype fp8; rope_kv_write.cu's
// layout: a block's K codes, V codes, K scales, V scales): each tile's codes and scales stream into the second stage's
// memory (two stages of codes, 16-byte copies; the scales two bf16 a copy into static shared memory), are expanded to
// bf16 (exact) into the first stage, and go through the same MMAs; a key's K scale multiplies its scores, s = fp32(q.k8) sk,
// and its V scale its p on the way to the MMA, bf16(p sv), while l sums p itself. Every kernel reading the fp8 pool does
// the same arithmetic (the prefill on sm_90a runs prefill or prefill_warp_pairs: the wgmma kernels read bf16 only).
#include "attention.cuh"
#include "fp8.cuh"

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

template <int HD, bool DECODE, int WG0, bool KV8>
__device__ __forceinline__ void attention_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        float *partO, float *partML, int heads, int kvHeads, int blockSize, float scale) {
    constexpr int KS = HD / 16, DN = HD / 8;
    constexpr int STAGE = 2 * KT * HD; // K then V of one tile, rows of HD unpadded (swizzled, below)
    const int *d = desc + blockIdx.x * 8;
    const int row0 = d[0], rows = d[1], pos0 = d[2], tab = d[3], s0 = d[4], s1 = d[5], part = d[6];
    // the descriptor is the step's plan, read before the wait (see common.cuh); the rest follows it
    dependent_launch_entry();
    const int g = blockIdx.y, G = heads / kvHeads;
    const float cl2 = attn_c(scale);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
    const int maxPos = pos0 + rows - 1;
    // WG warps share a row group of 16 MMA rows and split each tile: warp wq of the group takes key groups
    // nt0.. (NT of the tile's 8) and dims dn0.. (DNW of DN). p1: one group of four warps (one row's query
    // heads); prefill: four groups (rows 16 grp..) of WG0 warps each.
    constexpr int WG = DECODE ? 4 : WG0, RG = DECODE ? 1 : 4, THREADS = 32 * WG * RG;
    constexpr bool QW = WG > 1;
    constexpr int NT = 8 / WG, DNW = DN >= WG ? DN / WG : 1;
    const int wq = warp % WG, grp = warp / WG;
    const int nt0 = NT * wq, dn0 = wq * DNW;
    const bool pvWarp = dn0 < DN;
    // this thread's two MMA rows and their Q fragments
    const AttnRows<HD> tr(qkv, qkvStride, row0, rows, pos0, g, G, grp * 16, gr, tq);
    const int (&mr)[2] = tr.mr, (&pos)[2] = tr.pos;
    const bool (&valid)[2] = tr.valid;
    const unsigned (&qf)[KS][4] = tr.qf;
    const bool warpActive = grp * 16 < rows * G;
    // whether the warp's upper 8 MMA rows (h = 1) hold a row: not in a decode CTA of G <= 8 query heads per KV
    // head (the Nanbeige models have 7 and 5), where the half of every exp, sum and p of those rows is skipped
    const bool upper = grp * 16 + 8 < rows * G;
    // whether the group's 16 rows all hold a row, and the first one's position: tiles wholly before it need no mask
    const bool full = grp * 16 + 16 <= rows * G;
    const int firstPos = pos0 + grp * 16 / G;
    // split tiles (QW): the warps' tile maxima, then each quarter's sums and each 16-key P fragment,
    // exchanged within the group ([group][quarter or fragment][lane][words])
    __shared__ float qmax[QW ? RG * WG : 1][16];
    __shared__ float qsum[QW ? RG * 4 * 32 * 2 : 1];
    __shared__ unsigned xch[QW ? RG * 4 * 32 * 4 : 1];
    // a block of the pool holds K then V of every KV head, blockSize rows of HD each (a power of two, checked
    // by the host). This thread copies the 16 bytes at dims dim8.. of keys lk, lk + KSTEP, .. of each
    // stage (a warp's copies cover whole rows). A key's row is numbered in 32 bits (the host keeps a layer's
    // pool under 2^32 rows), so its address is one wide multiply-add, and the loop has a constant trip count.
    constexpr int KSTEP = THREADS / DN;
    const int lk = threadIdx.x / DN, dim8 = (threadIdx.x % DN) * 8, bsh = __ffs(blockSize) - 1;
    const unsigned blockRows = 2u * kvHeads * blockSize, headRow = (unsigned) g * blockSize, vRows = (unsigned) kvHeads * blockSize;
    const bf16 *column = pool + dim8, *vColumn = column + (long) vRows * HD;
    const int *table = tables + tab;
    const int firstKey = split_start(s0), lastKey = min(split_start(s1), maxPos + 1);
    const int tiles = lastKey > firstKey ? (lastKey - firstKey + KT - 1) / KT : 0;
    // K and V stream through two shared-memory stages with cp.async: stage i & 1 holds tile i, the next
    // tile loads while this one computes
    // (KV8: the one bf16 stage the codes are expanded into)
    auto stageOf = [&](int i) { return attn_smem + (KV8 ? 0 : (i & 1) * STAGE); };
    // KV8: tile i's K then V codes (KT rows of HD bytes each) in the second stage's memory, its K then V scales in kvScale
    __shared__ __align__(16) bf16 kvScale[KV8 ? 2 * 2 * KT : 2];
    auto codesOf = [&](int i) { return reinterpret_cast<unsigned char *>(attn_smem + STAGE) + (i & 1) * 2 * KT * HD; };
    constexpr int C8 = HD / 16, KSTEP8 = THREADS / C8;
    const int lk8 = threadIdx.x / C8, ch8 = threadIdx.x % C8;
    const unsigned blockBytes = 2u * kvHeads * blockSize * (HD + 2), codeHead = (unsigned) g * blockSize * HD,
            vCodes = (unsigned) kvHeads * blockSize * HD, scaleHead = 2u * kvHeads * blockSize * HD + 2u * g * blockSize;
    auto load8 = [&](int i) {
        unsigned char *Kc = codesOf(i), *Vc = Kc + KT * HD;
        const int k0 = firstKey + i * KT;
        #pragma unroll
        for (int key = 0; key < KT; key += KSTEP8) {
            if (KSTEP8 > KT && lk8 >= KT) break;
            const int kj = k0 + key + lk8;
            const bool in = kj < lastKey;
            const unsigned blk = in ? __ldg(static_cast<const unsigned *>(mad_wide(kj >> bsh, 4, table))) : 0u;
            const unsigned char *b = static_cast<const unsigned char *>(mad_wide(blk, blockBytes, pool)) + codeHead + (unsigned) (kj & (blockSize - 1)) * HD + 16 * ch8;
            const unsigned dk = (unsigned) __cvta_generic_to_shared(Kc + (key + lk8) * HD + 16 * ch8);
            const unsigned dv = (unsigned) __cvta_generic_to_shared(Vc + (key + lk8) * HD + 16 * ch8);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dk), "l"(b), "r"(in ? 16 : 0));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dv), "l"(b + vCodes), "r"(in ? 16 : 0));
        }
        if (threadIdx.x < KT) {
            // thread t copies the scales of keys 2 (t % 32), + 1 (one 4-byte copy: a block holds an even number of keys),
            // K's for t < 32, V's after
            const int isV = threadIdx.x >> 5, kj = k0 + 2 * (threadIdx.x & 31);
            const bool in = kj < lastKey;
            const unsigned blk = in ? __ldg(static_cast<const unsigned *>(mad_wide(kj >> bsh, 4, table))) : 0u;
            const unsigned char *b = static_cast<const unsigned char *>(mad_wide(blk, blockBytes, pool)) + scaleHead
                    + (isV ? 2u * kvHeads * blockSize : 0u) + 2u * (unsigned) (kj & (blockSize - 1));
            const unsigned d = (unsigned) __cvta_generic_to_shared(kvScale + ((i & 1) * 2 + isV) * KT + 2 * (threadIdx.x & 31));
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(d), "l"(b), "r"(in ? 4 : 0));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    // KV8: tile i's codes expanded into the bf16 stage, in its swizzled rows (8 codes a thread at a time)
    auto expand8 = [&](int i) {
        const unsigned char *Kc = codesOf(i);
        bf16 *Ks = stageOf(i);
        for (int u = threadIdx.x; u < 2 * KT * HD / 8; u += THREADS) {
            const int kv = u / (KT * HD / 8), key = (u / (HD / 8)) % KT, ch = u % (HD / 8);
            const uint2 raw = *reinterpret_cast<const uint2 *>(Kc + kv * KT * HD + key * HD + 8 * ch);
            uint4 o;
            o.x = fp8x2_bf16x2(raw.x & 0xFFFFu);
            o.y = fp8x2_bf16x2(raw.x >> 16);
            o.z = fp8x2_bf16x2(raw.y & 0xFFFFu);
            o.w = fp8x2_bf16x2(raw.y >> 16);
            *reinterpret_cast<uint4 *>(Ks + kv * KT * HD + swizzled<HD>(key, ch)) = o;
        }
    };
    auto load = [&](int i) {
        bf16 *Ks = stageOf(i), *Vs = Ks + KT * HD;
        const int k0 = firstKey + i * KT + lk;
        #pragma unroll
        for (int key = 0; key < KT; key += KSTEP) {
            if (KSTEP > KT && lk >= KT) break;
            const int kj = k0 + key;
            const unsigned dk = (unsigned) __cvta_generic_to_shared(Ks + swizzled<HD>(lk + key, dim8 >> 3));
            const unsigned dv = (unsigned) __cvta_generic_to_shared(Vs + swizzled<HD>(lk + key, dim8 >> 3));
            // past the row's last key: a copy of 0 bytes that fills the 16 with zeros (V must stay finite)
            const bool in = kj < lastKey;
            const unsigned row = in ? __ldg(static_cast<const unsigned *>(mad_wide(kj >> bsh, 4, table))) * blockRows + headRow + (kj & (blockSize - 1)) : 0u;
            const int bytes = in ? 16 : 0;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dk), "l"(mad_wide(row, 2 * HD, column)), "r"(bytes));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dv), "l"(mad_wide(row, 2 * HD, vColumn)), "r"(bytes));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };

    // the split's state (ms, ls, os: this thread's dims of its two rows), the run of folded splits (M, L;
    // prefill keeps its O in shared memory after the stages, this thread's slots q * THREADS + thread)
    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f}, ms[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f};
    float os[DNW][4];
    float *orun = reinterpret_cast<float *>(attn_smem + 2 * STAGE);
    // values a thread keeps in orun per 8-dim group: four (its two rows' two dims), or, in a decode CTA of at most 8 query
    // heads a KV head (no upper rows: a folding decode CTA holds one row, StepPlan), the first row's two (half the shared
    // memory: a CTA then fits three to an SM)
    const int OE = DECODE && G <= 8 ? 2 : 4;
    if (tiles > 0) {
        if constexpr (KV8) load8(0);
        else load(0);
    }
    for (int i = 0; i < tiles; i++) {
        const int t0 = firstKey + i * KT;
        if (i + 1 < tiles) {
            if constexpr (KV8) load8(i + 1);
            else load(i + 1);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        __syncthreads();
        if constexpr (KV8) {
            expand8(i);
            __syncthreads();
        }
        if (split_begins(t0)) {
            ms[0] = ms[1] = -INFINITY;
            ls[0] = ls[1] = 0.f;
            #pragma unroll
            for (int c = 0; c < DNW; c++) for (int e = 0; e < 4; e++) os[c][e] = 0.f;
        }
        if (warpActive) {
            const bf16 *Ks = stageOf(i), *Vs = Ks + KT * HD;
            // scores of this warp's 16 rows and key groups nt0..nt0+NT-1: S[c][e] for keys
            // t0 + 8 (nt0 + c) + 2 tq + (e & 1), rows gr (+8 for e >= 2)
            float S[NT][4];
            #pragma unroll
            for (int c = 0; c < NT; c++) {
                const int nt = nt0 + c;
                #pragma unroll
                for (int e = 0; e < 4; e++) S[c][e] = 0.f;
                #pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    unsigned b0 = *reinterpret_cast<const unsigned *>(Ks + swizzled<HD>(8 * nt + gr, 2 * kk) + 2 * tq);
                    unsigned b1 = *reinterpret_cast<const unsigned *>(Ks + swizzled<HD>(8 * nt + gr, 2 * kk + 1) + 2 * tq);
                    mma16816(S[c], qf[kk], b0, b1);
                }
                if constexpr (KV8) {
                    // s = fp32(q.k8) times the key's K scale
                    const bf16 *ks = kvScale + (i & 1) * 2 * KT + 8 * nt + 2 * tq;
                    const float k0s = __bfloat162float(ks[0]), k1s = __bfloat162float(ks[1]);
                    #pragma unroll
                    for (int e = 0; e < 4; e++) S[c][e] = __fmul_rn(S[c][e], (e & 1) ? k1s : k0s);
                }
                if (!full || t0 + KT - 1 > firstPos) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int h = e >> 1, key = t0 + 8 * nt + 2 * tq + (e & 1);
                        S[c][e] = (valid[h] && key <= pos[h] && (h == 0 || upper)) ? S[c][e] : -INFINITY;
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
            // the new max m' (mu: 0 while every key so far is masked), the old state's factor, and p = 2^(s c - m')
            float mu[2], alpha[2], q[2][4] = {};
            attn_new_max(ms, mx, cl2, upper, mu, alpha);
            #pragma unroll
            for (int c = 0; c < NT; c++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) S[c][e] = e >= 2 && !upper ? 0.f : attn_p(S[c][e], cl2, mu[e >> 1]);
            }
            // this thread's sums of p over each quarter of the tile's keys (nt 2Q, 2Q + 1), in order
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                if (h == 1 && !upper) break;
                #pragma unroll
                for (int c = 0; c < NT; c += 2) {
                    float a = __fadd_rn(S[c][2 * h], S[c][2 * h + 1]);
                    a = __fadd_rn(a, S[c + 1][2 * h]);
                    q[h][c / 2] = __fadd_rn(a, S[c + 1][2 * h + 1]);
                }
            }
            // P as the MMA's A fragments: pf[j] covers keys 16j..16j+15 (nt 2j, 2j + 1)
            unsigned pf[4][4];
            #pragma unroll
            for (int c = 0; c < NT; c++) {
                if constexpr (KV8) {
                    // p times the key's V scale on its way to the MMA (l has summed p itself)
                    const bf16 *vs = kvScale + (i & 1) * 2 * KT + KT + 8 * (nt0 + c) + 2 * tq;
                    const float v0 = __bfloat162float(vs[0]), v1 = __bfloat162float(vs[1]);
                    pf[c >> 1][(c & 1) * 2] = pack_bf16(__fmul_rn(S[c][0], v0), __fmul_rn(S[c][1], v1));
                    pf[c >> 1][(c & 1) * 2 + 1] = pack_bf16(__fmul_rn(S[c][2], v0), __fmul_rn(S[c][3], v1));
                } else {
                    pf[c >> 1][(c & 1) * 2] = pack_bf16(S[c][0], S[c][1]);
                    pf[c >> 1][(c & 1) * 2 + 1] = pack_bf16(S[c][2], S[c][3]);
                }
            }
            if constexpr (QW) {
                // each warp made the sums and fragments of its key groups; every warp needs all four
                float *qs = qsum + grp * 4 * 32 * 2;
                unsigned *qf4 = xch + grp * 4 * 32 * 4;
                #pragma unroll
                for (int c = 0; c < NT / 2; c++) {
                    qs[((nt0 / 2 + c) * 32 + lane) * 2] = q[0][c];
                    qs[((nt0 / 2 + c) * 32 + lane) * 2 + 1] = q[1][c];
                    #pragma unroll
                    for (int r = 0; r < 4; r++) qf4[((nt0 / 2 + c) * 32 + lane) * 4 + r] = pf[c][r];
                }
                group_sync<WG, RG>(grp);
                #pragma unroll
                for (int j = 0; j < 4; j++) {
                    q[0][j] = qs[(j * 32 + lane) * 2];
                    q[1][j] = qs[(j * 32 + lane) * 2 + 1];
                    #pragma unroll
                    for (int r = 0; r < 4; r++) pf[j][r] = qf4[(j * 32 + lane) * 4 + r];
                }
            }
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                if (h == 1 && !upper) break;
                // the canonical tile sum: quarters in order, then the row's four lanes
                ls[h] = __fadd_rn(__fmul_rn(ls[h], alpha[h]), attn_tile_sum(q[h]));
            }
            // the split's o rescaled to the new max (o is still zero in a split's first tile; a factor of 1 changes nothing)
            if (!split_begins(t0) && (alpha[0] != 1.f || alpha[1] != 1.f)) {
                #pragma unroll
                for (int c = 0; c < DNW; c++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) os[c][e] = __fmul_rn(os[c][e], alpha[e >> 1]);
                }
            }
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                // A operand from P: rows gr / gr+8, keys 16j + 2tq (+8); B from V through ldmatrix.trans
                #pragma unroll
                for (int c = 0; c < DNW; c++) {
                    const int dn = dn0 + c;
                    if (!pvWarp) break;
                    unsigned b0, b1;
                    unsigned sa = (unsigned) __cvta_generic_to_shared(Vs + swizzled<HD>(16 * j + (lane & 15), dn));
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(sa));
                    mma16816(os[c], pf[j], b0, b1);
                }
            }
        }
        __syncthreads(); // stage i & 1 is free for tile i + 2
        if (!warpActive || !(split_begins(t0 + KT) || i == tiles - 1)) continue;
        // the split ends here: a decode CTA with partial slots writes its state; prefill CTAs and decode CTAs that walk
        // all of their row's splits (part < 0) fold it into the run
        if (DECODE && part >= 0) {
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                if (!valid[h] || (h == 1 && !upper)) continue;
                long po = (long) (part + split_of(t0) - s0) * heads + g * G + mr[h] % G;
                if (tq == 0 && wq == 0) {
                    partML[po * 2] = ms[h];
                    partML[po * 2 + 1] = ls[h];
                }
                #pragma unroll
                for (int c = 0; c < DNW; c++) {
                    if (!pvWarp) break;
                    *reinterpret_cast<float2 *>(partO + po * HD + 8 * (dn0 + c) + 2 * tq) = make_float2(os[c][2 * h], os[c][2 * h + 1]);
                }
            }
        } else {
            const bool firstSplit = split_of(t0) == s0;
            float fa[2], fb[2];
            #pragma unroll
            for (int h = 0; h < 2; h++) fold_factors(M[h], L[h], ms[h], ls[h], fa[h], fb[h]);
            #pragma unroll
            for (int c = 0; c < DNW; c++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (e >= OE) break;
                    float *o = orun + (c * OE + e) * THREADS + threadIdx.x;
                    *o = fold_value(firstSplit ? 0.f : *o, fa[e >> 1], os[c][e], fb[e >> 1]);
                }
            }
        }
    }
    if (!DECODE || part < 0) {
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            if (!valid[h] || !warpActive || !pvWarp) continue;
            int r = mr[h] / G, qh = g * G + mr[h] % G;
            bf16 *op = out + (long) (row0 + r) * heads * HD + (long) qh * HD;
            #pragma unroll
            for (int c = 0; c < DNW; c++) {
                float o0 = orun[(c * OE + 2 * h) * THREADS + threadIdx.x], o1 = orun[(c * OE + 2 * h + 1) * THREADS + threadIdx.x];
                *reinterpret_cast<__nv_bfloat162 *>(op + 8 * (dn0 + c) + 2 * tq) = __floats2bfloat162_rn(__fdiv_rn(o0, L[h]), __fdiv_rn(o1, L[h]));
            }
        }
    }
}

#define ATTENTION(hd, decode, name, wg) \
    extern "C" __global__ void __launch_bounds__(decode ? 128 : 128 * wg) attention_hd##hd##_##name( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        attention_impl<hd, decode, wg, false>(qkv, qkvStride, out, pool, tables, desc, partO, partML, heads, kvHeads, blockSize, scale); \
    } \
    extern "C" __global__ void __launch_bounds__(decode ? 128 : 128 * wg) attention_hd##hd##_##name##_kv8( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        attention_impl<hd, decode, wg, true>(qkv, qkvStride, out, pool, tables, desc, partO, partML, heads, kvHeads, blockSize, scale); \
    }
#define ATTENTION_KINDS(hd) ATTENTION(hd, false, prefill, 1) ATTENTION(hd, true, decode, 4) ATTENTION(hd, false, prefill_warp_pairs, 2)
ATTENTION_KINDS(16)
ATTENTION_KINDS(32)
ATTENTION_KINDS(64)
ATTENTION_KINDS(128)

// The merge kernels that fold decode rows' split states are in attention_merge.cu.

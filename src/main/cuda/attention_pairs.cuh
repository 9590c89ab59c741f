// attention_pairs.cuh: the consumers of attention_ws.cu's prefill_ws_pairs, which walk a CTA's keys a pair of 64-key tiles at a
// time (128 keys: one split below 16K keys, a half or less of one beyond) with p0's arithmetic and its bits. A pair's
// two score tiles are in registers at once, so their softmax chains (masks, max trees, shuffles, powers, sums) run
// side by side in one warp: the chain of one tile a warp, with two warps a scheduler, is what bounds prefill_ws/prefill_ws_registers_no_pingpong (ncu:
// a consumer warp issues every 6 cycles, waiting on its own results). The order of every reduction is the tiles':
// tile A's max and sum move the split's state, then tile B's; the split's o is rescaled by A's factor before A's
// P V and by B's between A's and B's (the wgmmas of a pair accumulate in that order, as two iterations would).
//
// Stages: K and V apart (FlashAttention-3's pipeline): iteration j multiplies pair j + 1's K (the next scores) and
// pair j's V, so a pair's K slot is free once its scores are done and its V slot once its P V is; two slots of each,
// filled by the producer (attention_ws.cu), each marked full by its copies' own completion.
#pragma once
#include "attention_wgmma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// shared memory from the 1024-aligned base: K slots (2 pairs of tiles), V slots, the consumers' run's O (fp32), then the
// mbarriers: kFull[2], vFull[2] (the producer's 128 threads, by their copies' completion), kEmpty[2], vEmpty[2] (the
// consumers' 256 threads)
template <int HD>
struct PairSmem {
    static constexpr unsigned TILE = KT * HD * 2, PAIR = 2 * TILE;
    static constexpr unsigned K = 0, V = 2 * PAIR, O = 4 * PAIR, BARS = O + 2 * 64 * HD * 4;
    static constexpr unsigned BYTES = 1024 + BARS + 8 * 8;
    __device__ __forceinline__ static unsigned kFull(unsigned bars, int s) { return bars + 8 * s; }
    __device__ __forceinline__ static unsigned vFull(unsigned bars, int s) { return bars + 16 + 8 * s; }
    __device__ __forceinline__ static unsigned kEmpty(unsigned bars, int s) { return bars + 32 + 8 * s; }
    __device__ __forceinline__ static unsigned vEmpty(unsigned bars, int s) { return bars + 48 + 8 * s; }
    // bytes from one 64-dim column block of a K slot to the next: a tile's (the pair's tiles one after the other), or WIDE
    // (prefill_ws_pairs_wide) a pair's (the pair one tile of 128 keys, the second tile's keys rows 64.. of each column block)
    template <bool WIDE>
    __host__ __device__ static constexpr unsigned kColumnBlock() { return WIDE ? 2 * KT * 128 : KT * 128; }
    // where a pair's second K tile starts in its slot
    template <bool WIDE>
    __host__ __device__ static constexpr unsigned kSecond() { return WIDE ? KT * 128 : TILE; }
};

// The MMA rows of a CTA's 256 consumer threads t (warpgroup w: MMA rows 64 w ..; p0's rows per warp) walking the CTA's
// pairs of tiles from the stages at base (PairSmem), each split folded into the run's O in shared memory (this
// thread's values c = 4 j .. 4 j + 3 at float4 j * 256 + t), then out.
// (The run's O in registers instead, as prefill_ws_registers_no_pingpong keeps it, made ptxas spill 400-700 bytes a thread whatever the split of
// registers between producer and consumers.)
// WIDE (prefill_ws_pairs_wide): a pair's scores as one m64n128k16 product a 16-dim chunk (8 wgmmas a pair instead of 16), its K slot laid
// out as one tile of 128 keys (PairSmem::kColumnBlock); the same values as prefill_ws_pairs's.
template <int HD, int VLBO, int VSBO, bool WIDE = false>
__device__ __forceinline__ void wg_attention_pairs(const bf16 *qkv, int qkvStride, bf16 *out, const WgCta &cta, int heads, int kvHeads,
        float scale, unsigned t, unsigned base, float *orun) {
    using SM = PairSmem<HD>;
    constexpr int KS = HD / 16, DN = HD / 8, THREADS = 256;
    const int g = blockIdx.y, G = heads / kvHeads;
    const float cl2 = attn_c(scale);
    const int warp = t >> 5, lane = t & 31, gr = lane >> 2, tq = lane & 3;
    const AttnRows<HD> tr(qkv, qkvStride, cta.row0, cta.rows, cta.pos0, g, G, warp * 16, gr, tq);
    const int (&mr)[2] = tr.mr, (&pos)[2] = tr.pos;
    const bool (&valid)[2] = tr.valid;
    const bool full = warp * 16 + 16 <= cta.rows * G;
    const int firstPos = cta.pos0 + warp * 16 / G;
    const int firstKey = cta.firstKey(), pairs = (cta.tiles() + 1) / 2;
    const unsigned bars = base + SM::BARS;

    const unsigned (&qf)[KS][4] = tr.qf;

    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f}, ms[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f};
    float os[DN * 4], SA[32], SB[32];
    // the softmax of the pair at t0 (tiles A = SA, B = SB): the split's max and sum move on by A, then by B; alpha: the
    // factor of the split's o before A (aA) and before B (aB)
    auto softmax = [&](int t0, unsigned (&pA)[4][4], unsigned (&pB)[4][4], float (&aA)[2], float (&aB)[2]) {
        // (one branch for both tiles: a mask where no key passes a row's position changes nothing. A warp's rows past the
        // CTA's, or its upper rows where it has none, are masked too, and then computed as the others are, without a branch,
        // so that both rows' and both tiles' chains share one basic block: their max is -inf, mu 0, p = 2^-inf = +0, the
        // split's factors 0 and its sum 0, no NaN; they are never written out)
        if (!full || t0 + 2 * KT - 1 > firstPos) {
            wg_tile_mask(SA, t0, tq, valid, pos);
            wg_tile_mask(SB, t0 + KT, tq, valid, pos);
        }
        float mxA[2], mxB[2];
        wg_tile_max(SA, mxA);
        wg_tile_max(SB, mxB);
        wg_lanes_max(mxA);
        wg_lanes_max(mxB);
        float muA[2], muB[2], qA[2][4] = {}, qB[2][4] = {};
        attn_new_max(ms, mxA, cl2, true, muA, aA);
        attn_new_max(ms, mxB, cl2, true, muB, aB);
        wg_tile_powers(SA, cl2, muA, pA, qA);
        wg_tile_powers(SB, cl2, muB, pB, qB);
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            ls[h] = __fadd_rn(__fmul_rn(ls[h], aA[h]), attn_tile_sum(qA[h]));
            ls[h] = __fadd_rn(__fmul_rn(ls[h], aB[h]), attn_tile_sum(qB[h]));
        }
    };
    // a pair's scores: Q (p0's fragments, in registers: the wgmmas then read only K from shared memory, whose bandwidth
    // the scores' and P V's operands and the split's fold share) times the K tiles of the slot at ks, each chunk kk of 16
    // dims in order from zero
    auto scores = [&](unsigned ks) {
        constexpr unsigned CB = SM::template kColumnBlock<WIDE>();
        const unsigned long long a0 = wg_desc(base + SM::K + ks, 16, 1024);
        if constexpr (WIDE) {
            // both tiles' keys in one product a chunk
            wg_scores_pair0(SA, SB, qf[0], a0);
            #pragma unroll
            for (int kk = 1; kk < KS; kk++) wg_scores_pair(SA, SB, qf[kk], a0 + (((kk >> 2) * CB + (kk & 3) * 32) >> 4));
        } else {
            const unsigned long long b0 = a0 + (SM::TILE >> 4);
            wg_scores0(SA, qf[0], a0);
            #pragma unroll
            for (int kk = 1; kk < KS; kk++) wg_scores(SA, qf[kk], a0 + (((kk >> 2) * CB + (kk & 3) * 32) >> 4), 1);
            wg_scores0(SB, qf[0], b0);
            #pragma unroll
            for (int kk = 1; kk < KS; kk++) wg_scores(SB, qf[kk], b0 + (((kk >> 2) * CB + (kk & 3) * 32) >> 4), 1);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    auto pinScores = [&]() {
        #pragma unroll
        for (int c = 0; c < 32; c++) {
            wg_pin(SA[c]);
            wg_pin(SB[c]);
        }
    };
    auto pinO = [&]() {
        #pragma unroll
        for (int c = 0; c < DN * 4; c++) wg_pin(os[c]);
    };
    auto pinP = [&](unsigned (&pf)[4][4]) {
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            #pragma unroll
            for (int r = 0; r < 4; r++) wg_pin_r(pf[j][r]);
        }
    };
    auto rescale = [&](const float (&a)[2]) {
        #pragma unroll
        for (int c = 0; c < DN * 4; c++) os[c] = __fmul_rn(os[c], a[(c & 3) >> 1]);
    };

    unsigned pA[4][4], pB[4][4], nB[4][4];
    float aA[2], aB[2], bA[2], bB[2];
    if (pairs > 0) {
        mbar_wait(SM::kFull(bars, 0), 0);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        wg_fence();
        scores(0);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        pinScores();
        mbar_arrive(SM::kEmpty(bars, 0));
        softmax(firstKey, pA, pB, aA, aB);
    }
    // iteration j: pair j's P V (A's, then B's after the rescale between them) and pair j + 1's scores, issued A's P V
    // first; the next pair's softmax while B's P V runs. The last iteration issues scores too (of a slot read before,
    // unused), so no wgmma sits in a branch
    #pragma unroll 1
    for (int j = 0; j < pairs; j++) {
        const int t0 = firstKey + 2 * j * KT;
        const bool next = j + 1 < pairs, first = split_begins(t0);
        const bool splitEnds = split_begins(t0 + 2 * KT) || !next;
        if (next) mbar_wait(SM::kFull(bars, (j + 1) & 1), ((j + 1) >> 1) & 1);
        mbar_wait(SM::vFull(bars, j & 1), (j >> 1) & 1);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        // the split's o to A's max (o is still zero at a split's first tile: skipped)
        if (!first) rescale(aA);
        pinO();
        pinP(pA);
        pinP(pB);
        const unsigned long long v0 = wg_desc(base + SM::V + (j & 1) * SM::PAIR, VLBO, VSBO), vB0 = v0 + (SM::TILE >> 4);
        wg_fence();
        #pragma unroll
        for (int c = 0; c < 4; c++) wg_mma<HD, 1>(os, pA[c], v0 + ((c * 16 * 128) >> 4), c > 0 || !first);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        scores(((j + 1) & 1) * SM::PAIR);
        float fa[2], fb[2];
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        pinO();
        pinP(pA);
        // to B's max, between A's products and B's
        rescale(aB);
        pinO();
        wg_fence();
        #pragma unroll
        for (int c = 0; c < 4; c++) wg_mma<HD, 1>(os, pB[c], vB0 + ((c * 16 * 128) >> 4), 1);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if (splitEnds) {
            #pragma unroll
            for (int h = 0; h < 2; h++) fold_factors(M[h], L[h], ms[h], ls[h], fa[h], fb[h]);
        }
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        pinScores();
        if (next) {
            mbar_arrive(SM::kEmpty(bars, (j + 1) & 1));
            if (splitEnds) {
                ms[0] = ms[1] = -INFINITY;
                ls[0] = ls[1] = 0.f;
            }
            softmax(t0 + 2 * KT, pA, nB, bA, bB); // A's products are done: pA takes the next pair's
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        pinO();
        pinP(pB);
        mbar_arrive(SM::vEmpty(bars, j & 1));
        if (splitEnds) wg_fold_orun<DN, THREADS>(orun, t, split_of(t0) == cta.s0, fa, os, fb);
        aA[0] = bA[0]; // (pA holds the next pair's A already)
        aA[1] = bA[1];
        wg_take_next(pB, nB, aB, bB);
    }
    wg_store_rows<HD>(out, cta, heads, g, G, mr, valid, L, tq, [&](int j, int h, float &o0, float &o1) {
        wg_orun_values<THREADS>(orun, t, j, h, o0, o1);
    });
}
#endif

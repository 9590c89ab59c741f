// attention_wgmma.cuh: what the Hopper prefill kernels share (attention_wgmma.cu's prefill_wgmma, attention_ws.cu's prefill_ws and
// prefill_ws_pingpong): a CTA's descriptor and the tiles it walks, one thread's share of a tile's K/V copies, and the rows of the
// MMA tile walking those tiles (wg_attention_rows), every warpgroup 64 MMA rows with p0's arithmetic. The kernels
// differ only in who fills the stages and when (a Feed): prefill_wgmma's warpgroup copies its own tiles, two stages deep;
// prefill_ws's producer warpgroup copies them for two consumer warpgroups through mbarriers.
//
// K and V tiles arrive by cp.async in wgmma's 128-byte swizzled layout: a tile is HD / 64 column blocks of
// [KT rows][64 dims], 128 bytes a row, 16-byte chunk c of row r at c ^ (r mod 8), 8-row groups 1024 bytes apart;
// K is read K-major (rows are keys, k runs along dims), V N-major (k runs along keys). A stage is a tile's K then
// its V (2 KT HD bf16). Per tile and warpgroup:
//   S (64 rows x 64 keys) = Q K^T: HD / 16 wgmma m64n64k16, Q from registers (p0's fragments), K from
//   shared memory; then p0's softmax of the tile on S in registers, P packed to bf16 fragments;
//   O (64 x HD) += P V: four wgmma m64n{HD}k16, P from registers, V from shared memory (N-major).
#pragma once
#include "wgmma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// a prefill CTA (attention.cu's descriptor): its rows, and the keys it walks, tiles of KT from firstKey
struct WgCta {
    int row0, rows, pos0, tab, s0, s1;
    __device__ __forceinline__ explicit WgCta(const int *d) : row0(d[0]), rows(d[1]), pos0(d[2]), tab(d[3]), s0(d[4]), s1(d[5]) {}
    __device__ __forceinline__ int maxPos() const { return pos0 + rows - 1; }
    __device__ __forceinline__ int firstKey() const { return split_start(s0); }
    __device__ __forceinline__ int lastKey() const { return min(split_start(s1), maxPos() + 1); }
    __device__ __forceinline__ int tiles() const {
        const int first = firstKey(), last = lastKey();
        return last > first ? (last - first + KT - 1) / KT : 0;
    }
};

// One of THREADS threads' share of a tile's K and V copies: chunk ch of keys lk, lk + KSTEP, ... of the KV head's
// tile, zeros for keys past the last (never a stale slot of the pool).
template <int HD, int THREADS>
struct WgTileCopy {
    static constexpr int DN = HD / 8, KSTEP = THREADS / DN;
    static constexpr unsigned STAGE = 2u * KT * HD * 2; // K then V of one tile, bytes
    static_assert(KSTEP % 8 == 0, "a thread's keys KSTEP apart share their swizzle (key mod 8)");
    const int lk, ch, bsh, blockSize, firstKey, lastKey;
    const unsigned blockRows, headRow, vRows;
    const bf16 *column, *vColumn;
    const int *table;
    unsigned off0;

    __device__ __forceinline__ WgTileCopy(const bf16 *pool, const int *tables, const WgCta &c, int g, int kvHeads, int blockSize, unsigned t)
        : lk(t / DN), ch(t % DN), bsh(__ffs(blockSize) - 1), blockSize(blockSize), firstKey(c.firstKey()), lastKey(c.lastKey()),
          blockRows(2u * kvHeads * blockSize), headRow((unsigned) g * blockSize), vRows((unsigned) kvHeads * blockSize),
          column(pool + ch * 8), vColumn(column + (long) vRows * HD), table(tables + c.tab) {
        off0 = wg_chunk(lk, ch); // key lk + r's chunk lies r * 128 bytes further (r a multiple of 8)
    }

    // one 16-byte copy, zeros where the key is past the last
    __device__ __forceinline__ static void copy(unsigned dst, const void *src, bool in) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(in ? 16 : 0));
    }

    // whether a thread's keys KSTEP apart come in pairs that share a KV block (tiles start at multiples of 64, lk < KSTEP)
    __device__ __forceinline__ bool paired() const { return blockSize >= 2 * KSTEP; }

    // the pool rows of this thread's keys of tile i (paired: of each pair's first key, in row[0 .. KT / (2 KSTEP))),
    // 0 past the last key: the table reads, which need no stage
    __device__ __forceinline__ void rows(int i, unsigned (&row)[KT / KSTEP]) const {
        const int k0 = firstKey + i * KT + lk, step = paired() ? 2 * KSTEP : KSTEP;
        #pragma unroll
        for (int m = 0; m < KT / KSTEP; m++) {
            const int kj = k0 + m * step;
            row[m] = m * step < KT && kj < lastKey ? __ldg(table + (kj >> bsh)) * blockRows + headRow + (kj & (blockSize - 1)) : 0u;
        }
    }

    // tile i into the stage at shared address stage from its rows (not committed: the caller commits the group)
    __device__ __forceinline__ void copy(unsigned stage, int i, const unsigned (&row)[KT / KSTEP]) const {
        const unsigned ks = stage + off0, vs = ks + STAGE / 2;
        const int k0 = firstKey + i * KT + lk;
        if (paired()) {
            // one address for both keys of a pair, the second KSTEP rows further
            #pragma unroll
            for (int key = 0; key < KT; key += 2 * KSTEP) {
                const int kj = k0 + key;
                const bool in = kj < lastKey, in2 = kj + KSTEP < lastKey;
                const unsigned r = row[key / (2 * KSTEP)];
                const bf16 *k = static_cast<const bf16 *>(mad_wide(r, 2 * HD, column)), *v = static_cast<const bf16 *>(mad_wide(r, 2 * HD, vColumn));
                copy(ks + key * 128, k, in);
                copy(vs + key * 128, v, in);
                copy(ks + (key + KSTEP) * 128, k + KSTEP * HD, in2);
                copy(vs + (key + KSTEP) * 128, v + KSTEP * HD, in2);
            }
        } else {
            #pragma unroll
            for (int key = 0; key < KT; key += KSTEP) {
                const bool in = k0 + key < lastKey;
                copy(ks + key * 128, mad_wide(row[key / KSTEP], 2 * HD, column), in);
                copy(vs + key * 128, mad_wide(row[key / KSTEP], 2 * HD, vColumn), in);
            }
        }
    }

    // tile i's K alone (V: its V alone) into the tile at shared address dst, from its rows (not committed): attention_ws.cu's
    // prefill_ws_pairs keeps K and V apart. CB: the bytes from one 64-dim column block to the next (a tile's own KT * 128, or prefill_ws_pairs_wide's
    // 2 KT * 128: a pair's two K tiles as one of 128 keys, the second tile's keys rows 64.. of each column block)
    template <bool V, unsigned CB = KT * 128>
    __device__ __forceinline__ void copy_part(unsigned dst, int i, const unsigned (&row)[KT / KSTEP]) const {
        const unsigned d = dst + off0 + (unsigned) (ch >> 3) * (CB - KT * 128);
        const bf16 *col = V ? vColumn : column;
        const int k0 = firstKey + i * KT + lk;
        if (paired()) {
            #pragma unroll
            for (int key = 0; key < KT; key += 2 * KSTEP) {
                const int kj = k0 + key;
                const bf16 *src = static_cast<const bf16 *>(mad_wide(row[key / (2 * KSTEP)], 2 * HD, col));
                copy(d + key * 128, src, kj < lastKey);
                copy(d + (key + KSTEP) * 128, src + KSTEP * HD, kj + KSTEP < lastKey);
            }
        } else {
            #pragma unroll
            for (int key = 0; key < KT; key += KSTEP) copy(d + key * 128, mad_wide(row[key / KSTEP], 2 * HD, col), k0 + key < lastKey);
        }
    }

    // tile i into the stage at shared address stage (not committed)
    __device__ __forceinline__ void operator()(unsigned stage, int i) const {
        unsigned row[KT / KSTEP];
        rows(i, row);
        copy(stage, i, row);
    }
};

// p0's softmax of one 64-key tile in pieces, shared by wg_attention_rows (a tile an iteration) and attention_pairs.cuh
// (two tiles an iteration, their pieces side by side). This thread's 32 scores S hold its two rows h: S[4 c + 2 h] and
// S[4 c + 2 h + 1] are keys t0 + 8 c + 2 tq and the one after.

// keys past a row's position, and rows past the CTA's (valid), masked to -inf
__device__ __forceinline__ void wg_tile_mask(float (&S)[32], int t0, int tq, const bool (&valid)[2], const int (&pos)[2]) {
    #pragma unroll
    for (int c = 0; c < 8; c++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int h = e >> 1, key = t0 + 8 * c + 2 * tq + (e & 1);
            S[4 * c + e] = (valid[h] && key <= pos[h]) ? S[4 * c + e] : -INFINITY;
        }
    }
}

// each row's maximum of this thread's scores, as a tree (a maximum is exact: any order gives the same bits; a chain of
// 16 waited on each step)
__device__ __forceinline__ void wg_tile_max(const float (&S)[32], float (&mx)[2]) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        float m[8];
        #pragma unroll
        for (int c = 0; c < 8; c++) m[c] = fmaxf(S[4 * c + 2 * h], S[4 * c + 2 * h + 1]);
        #pragma unroll
        for (int w = 4; w > 0; w >>= 1) {
            #pragma unroll
            for (int c = 0; c < w; c++) m[c] = fmaxf(m[c], m[c + w]);
        }
        mx[h] = fmaxf(m[0], -INFINITY);
    }
}

// each row's maximum over the row's four lanes
__device__ __forceinline__ void wg_lanes_max(float (&mx)[2]) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    }
}

// p of the tile against its rows' mu (p0's rounding) on S, its rows' quarter sums q (p0's order) and its P fragments
// (pf[j]: keys 16 j .. 16 j + 15, bf16)
__device__ __forceinline__ void wg_tile_powers(float (&S)[32], float cl2, const float (&mu)[2], unsigned (&pf)[4][4], float (&q)[2][4]) {
    #pragma unroll
    for (int c = 0; c < 32; c++) S[c] = attn_p(S[c], cl2, mu[(c & 3) >> 1]);
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        #pragma unroll
        for (int c = 0; c < 8; c += 2) {
            float a = __fadd_rn(S[4 * c + 2 * h], S[4 * c + 2 * h + 1]);
            a = __fadd_rn(a, S[4 * (c + 1) + 2 * h]);
            q[h][c / 2] = __fadd_rn(a, S[4 * (c + 1) + 2 * h + 1]);
        }
    }
    #pragma unroll
    for (int c = 0; c < 8; c++) {
        pf[c >> 1][(c & 1) * 2] = pack_bf16(S[4 * c], S[4 * c + 1]);
        pf[c >> 1][(c & 1) * 2 + 1] = pack_bf16(S[4 * c + 2], S[4 * c + 3]);
    }
}

// the next tile's P fragments and factors taken as the current ones (the end of an iteration)
__device__ __forceinline__ void wg_take_next(unsigned (&pf)[4][4], const unsigned (&pn)[4][4], float (&alpha)[2], const float (&an)[2]) {
    #pragma unroll
    for (int j = 0; j < 4; j++) {
        #pragma unroll
        for (int r = 0; r < 4; r++) pf[j][r] = pn[j][r];
    }
    alpha[0] = an[0];
    alpha[1] = an[1];
}

// warpgroup w's 64 MMA rows of Q (zeros past the CTA's rows; this thread lt of its 128) into its tile at qw, HD / 64
// column blocks of [64 rows][128 bytes] swizzled as K's, fenced for the wgmmas' async proxy and met at the warpgroup's
// named barrier
template <int HD>
__device__ __forceinline__ void wg_stage_q(const bf16 *qkv, int qkvStride, const WgCta &cta, int g, int G, int w, int lt, unsigned qw) {
    constexpr int DN = HD / 8;
    #pragma unroll
    for (int k = 0; k < 64 * DN / 128; k++) {
        const int idx = k * 128 + lt, m = idx / DN, ch = idx % DN, mw = 64 * w + m, r = mw / G, j = mw % G;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < cta.rows) v = *reinterpret_cast<const uint4 *>(qkv + (long) (cta.row0 + r) * qkvStride + (long) (g * G + j) * HD + ch * 8);
        st_shared_u4(qw + wg_chunk(m, ch), v);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if (w == 0) named_sync<3>(128);
    else named_sync<4>(128);
}

// a split's o (this thread's HD / 2 values as wgmma lays them out) folded into the run's O in shared memory: this
// thread's values c = 4 j .. 4 j + 3 at float4 j * THREADS + t (conflict-free), from zeros at the CTA's first split
template <int DN, int THREADS>
__device__ __forceinline__ void wg_fold_orun(float *orun, unsigned t, bool firstSplit, const float (&fa)[2], const float (&os)[DN * 4],
        const float (&fb)[2]) {
    #pragma unroll
    for (int j = 0; j < DN; j++) {
        float4 *o = reinterpret_cast<float4 *>(orun) + j * THREADS + t;
        float4 v = firstSplit ? make_float4(0.f, 0.f, 0.f, 0.f) : *o;
        v.x = fold_value(v.x, fa[0], os[4 * j], fb[0]);
        v.y = fold_value(v.y, fa[0], os[4 * j + 1], fb[0]);
        v.z = fold_value(v.z, fa[1], os[4 * j + 2], fb[1]);
        v.w = fold_value(v.w, fa[1], os[4 * j + 3], fb[1]);
        *o = v;
    }
}

// this thread's two rows out (bf16, the run's O over its sum L): row h's values 8 j + 2 tq and the one after are
// get(j, h, o0, o1)'s
template <int HD, class Get>
__device__ __forceinline__ void wg_store_rows(bf16 *out, const WgCta &cta, int heads, int g, int G, const int (&mr)[2], const bool (&valid)[2],
        const float (&L)[2], int tq, Get get) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        if (!valid[h]) continue;
        int r = mr[h] / G, qh = g * G + mr[h] % G;
        bf16 *op = out + (long) (cta.row0 + r) * heads * HD + (long) qh * HD;
        #pragma unroll
        for (int j = 0; j < HD / 8; j++) {
            float o0, o1;
            get(j, h, o0, o1);
            *reinterpret_cast<__nv_bfloat162 *>(op + 8 * j + 2 * tq) = __floats2bfloat162_rn(__fdiv_rn(o0, L[h]), __fdiv_rn(o1, L[h]));
        }
    }
}

// the values of row h at j (wg_store_rows) from the run's O in shared memory (wg_fold_orun's layout)
template <int THREADS>
__device__ __forceinline__ void wg_orun_values(const float *orun, unsigned t, int j, int h, float &o0, float &o1) {
    float4 v = reinterpret_cast<const float4 *>(orun)[j * THREADS + t];
    o0 = h ? v.z : v.x;
    o1 = h ? v.w : v.y;
}

// The MMA rows of a CTA's consumer threads t = 0 .. THREADS - 1 (warpgroup w: MMA rows 64 w ..; p0's rows per warp)
// walking the CTA's tiles: the scores, softmax, P V and the fold of every split into the running O (fp32, orun: this
// thread's values c = 4 j .. 4 j + 3 at float4 j * THREADS + t), then out. The feed supplies the stages:
//   stage(i)          the shared address of tile i's stage
//   first()           before tile 0's scores: tile 0's K has landed
//   before(i, next)   at the start of iteration i: tile i + 1's K (where next) and tile i's V have landed
//   issue(), issued(i, next)   around the iteration's wgmma issue (prefill_ws_pingpong's ping-pong between warpgroups)
//   read(i)           tile i's stage is read (its wgmmas are done)
//   after(i)          the end of iteration i (the split's fold is in orun, or in O with QS)
// QS (attention_ws.cu's prefill_ws_registers): the warpgroup's Q staged once in shared memory at qs (its 64 MMA rows as a K tile is laid
// out, so the scores' wgmmas read Q by descriptor) instead of in fragment registers, and the run's O kept in registers
// instead of orun: the same values, no shared-memory round trip at a split's end.
template <int HD, int VLBO, int VSBO, int THREADS, class Feed, bool QS = false>
__device__ __forceinline__ void wg_attention_rows(const bf16 *qkv, int qkvStride, bf16 *out, const WgCta &cta, int heads, int kvHeads,
        float scale, unsigned t, float *orun, Feed &feed, unsigned qs = 0) {
    constexpr int KS = HD / 16, DN = HD / 8;
    constexpr unsigned STAGE = 2u * KT * HD * 2;
    const int g = blockIdx.y, G = heads / kvHeads;
    const float cl2 = attn_c(scale);
    // warp: the first of this warp's 16 MMA rows (warpgroup w takes rows 64 w..)
    const int warp = t >> 5, lane = t & 31, gr = lane >> 2, tq = lane & 3;
    // this thread's two MMA rows and their Q fragments
    const AttnRows<HD> tr(qkv, qkvStride, cta.row0, cta.rows, cta.pos0, g, G, warp * 16, gr, tq);
    const int (&mr)[2] = tr.mr, (&pos)[2] = tr.pos;
    const bool (&valid)[2] = tr.valid;
    const unsigned (&qf)[KS][4] = tr.qf; // (QS: unused, its loads dropped)
    // whether the warp's 16 rows all hold a row, and the first one's position: tiles wholly before it need no mask
    const bool full = warp * 16 + 16 <= cta.rows * G;
    const int firstPos = cta.pos0 + warp * 16 / G;
    const int firstKey = cta.firstKey(), tiles = cta.tiles();

    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f}, ms[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f};
    // QS: the run's O (this thread's HD / 2 values as os holds them), from zeros as orun's first split
    float O[QS ? DN * 4 : 1];
    #pragma unroll
    for (int c = 0; c < (QS ? DN * 4 : 1); c++) O[c] = 0.f;
    // QS: the warpgroup's 64 MMA rows of Q (zeros past the CTA's rows) into its tile at qs, HD / 64 column blocks of
    // [64 rows][128 bytes] swizzled as K's, then fenced for the wgmmas' async proxy and met at the warpgroup's barrier
    unsigned qw = 0;
    if constexpr (QS) {
        const int w = (int) (t >> 7), lt = (int) (t & 127);
        qw = qs + (unsigned) w * (64u * HD * 2);
        wg_stage_q<HD>(qkv, qkvStride, cta, g, G, w, lt, qw);
    }
    // os: the split's o (this thread's HD / 2 values, as wgmma lays them out); S: a tile's scores
    float os[DN * 4], S[32];
    // softmax of the tile at t0 on S (p0's arithmetic): the split's max and sum move on, P fragments out
    // (pf[j]: keys 16 j .. 16 j + 15), alpha the factor of the split's o before this tile
    auto softmax = [&](int t0, unsigned (&pf)[4][4], float (&alpha)[2]) {
        if (!full || t0 + KT - 1 > firstPos) wg_tile_mask(S, t0, tq, valid, pos);
        float mx[2];
        wg_tile_max(S, mx);
        wg_lanes_max(mx);
        float mu[2], q[2][4] = {};
        attn_new_max(ms, mx, cl2, true, mu, alpha);
        // A warp's rows past the CTA's (its lower half's too, where it has no upper rows) are masked to -inf above (a
        // partial warp is masked) and computed as the others are, without a branch, so that both rows' chains (and, in prefill_ws_pairs,
        // both tiles') share one basic block for the scheduler: their max is -inf, mu 0, p = 2^-inf = +0, the split's
        // factors 0 and its sum 0, no NaN; they are never written out.
        wg_tile_powers(S, cl2, mu, pf, q);
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            ls[h] = __fadd_rn(__fmul_rn(ls[h], alpha[h]), attn_tile_sum(q[h]));
        }
    };
    // the descriptors of tile i's K chunks (kd) and V chunks (vd), made before the fence that precedes their wgmmas
    // (a descriptor's start address is bits 0-13, address / 16, and shared addresses stay under 2^18: a chunk's descriptor
    // is its stage's plus the chunk's offset / 16, no carry leaving the field)
    unsigned long long kd[KS], vd[4];
    auto descriptors = [&](int i) {
        const unsigned ks = feed.stage(i);
        const unsigned long long k0 = wg_desc(ks, 16, 1024), v0 = wg_desc(ks + STAGE / 2, VLBO, VSBO);
        #pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            kd[kk] = k0 + (((kk >> 2) * (KT * 128) + (kk & 3) * 32) >> 4);
            wg_pin_l(kd[kk]);
        }
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            vd[j] = v0 + ((j * 16 * 128) >> 4);
            wg_pin_l(vd[j]);
        }
    };
    auto scores = [&]() {
        if constexpr (QS) {
            // Q's chunk kk: as K's, from the warpgroup's tile
            const unsigned long long q0 = wg_desc(qw, 16, 1024);
            wg_scores_ss0(S, q0, kd[0]);
            #pragma unroll
            for (int kk = 1; kk < KS; kk++) wg_scores_ss(S, q0 + (((kk >> 2) * (KT * 128) + (kk & 3) * 32) >> 4), kd[kk]);
        } else {
            wg_scores0(S, qf[0], kd[0]);
            #pragma unroll
            for (int kk = 1; kk < KS; kk++) wg_scores(S, qf[kk], kd[kk], 1);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    // Software pipeline: iteration i issues tile i + 1's scores and tile i's P V back to back, then does
    // tile i + 1's softmax while the tensor cores run P V.
    unsigned pf[4][4], pn[4][4];
    float alpha[2], an[2];
    if (tiles > 0) {
        feed.first();
        descriptors(0);
        wg_fence();
        scores();
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        #pragma unroll
        for (int c = 0; c < 32; c++) wg_pin(S[c]);
        softmax(firstKey, pf, alpha);
    }
    // one iteration; next: a tile follows. The last iteration issues scores too (of a stale stage, unused), so no
    // wgmma sits in a branch (ptxas would serialise the pipeline)
    auto step = [&](int i, bool next) {
        const int t0 = firstKey + i * KT;
        const bool splitEnds = split_begins(t0 + KT) || !next;
        feed.before(i, next);
        // the split's o rescaled to the new max (o is still zero in a split's first tile: skipped; a factor of 1
        // changes nothing, but a branch around it would put the accumulators through moves in the wgmma pipeline)
        if (!split_begins(t0)) {
            #pragma unroll
            for (int c = 0; c < DN * 4; c++) os[c] = __fmul_rn(os[c], alpha[(c & 3) >> 1]);
        }
        // every register the wgmmas read or write is final before the fence (an asm, so no write moves past it)
        #pragma unroll
        for (int c = 0; c < DN * 4; c++) wg_pin(os[c]);
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            #pragma unroll
            for (int r = 0; r < 4; r++) wg_pin_r(pf[j][r]);
        }
        unsigned long long vdi[4];
        #pragma unroll
        for (int j = 0; j < 4; j++) vdi[j] = vd[j];
        descriptors(i + 1);
        feed.issue();
        wg_fence();
        scores();
        #pragma unroll
        for (int j = 0; j < 4; j++) wg_mma<HD, 1>(os, pf[j], vdi[j], j > 0 || !split_begins(t0));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        feed.issued(i, next);
        float fa[2], fb[2];
        if (splitEnds) {
            #pragma unroll
            for (int h = 0; h < 2; h++) fold_factors(M[h], L[h], ms[h], ls[h], fa[h], fb[h]);
        }
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (next) {
            #pragma unroll
            for (int c = 0; c < 32; c++) wg_pin(S[c]);
            #pragma unroll
            for (int kk = 0; kk < KS; kk++) wg_pin_l(kd[kk]);
            if (splitEnds) {
                ms[0] = ms[1] = -INFINITY;
                ls[0] = ls[1] = 0.f;
            }
            softmax(t0 + KT, pn, an);
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        // the wgmmas' inputs stay live (and in their registers) until they are done
        #pragma unroll
        for (int c = 0; c < DN * 4; c++) wg_pin(os[c]);
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            wg_pin_l(vdi[j]);
            #pragma unroll
            for (int r = 0; r < 4; r++) wg_pin_r(pf[j][r]);
        }
        feed.read(i);
        if (QS && splitEnds) {
            #pragma unroll
            for (int c = 0; c < (QS ? DN * 4 : 1); c++) O[c] = fold_value(O[c], fa[(c & 3) >> 1], os[c], fb[(c & 3) >> 1]);
        } else if (splitEnds) {
            wg_fold_orun<DN, THREADS>(orun, t, split_of(t0) == cta.s0, fa, os, fb);
        }
        feed.after(i);
        wg_take_next(pf, pn, alpha, an);
    };
    #pragma unroll 1
    for (int i = 0; i < tiles; i++) step(i, i + 1 < tiles);
    wg_store_rows<HD>(out, cta, heads, g, G, mr, valid, L, tq, [&](int j, int h, float &o0, float &o1) {
        if constexpr (QS) {
            o0 = O[4 * j + 2 * h];
            o1 = O[4 * j + 2 * h + 1];
        } else {
            wg_orun_values<THREADS>(orun, t, j, h, o0, o1);
        }
    });
}
#endif

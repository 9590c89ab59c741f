// attention_wgmma: prefill attention on Hopper's warpgroup MMA (sm_90a), the same values as attention.cu's
// p0 bit for bit: the same tiles (KT keys), splits (attention.cuh), canonical tile sums and fold, the same
// arithmetic on every score, only the matrix products issued as wgmma (one fp32 accumulator fed k's
// 16-wide chunks in order from zero, as mma.sync does; docs/ARCHITECTURE.md, "Attention numerics").
//
// Kernel attention_hd128_p0g: p0's arguments, grid and descriptors (attention.cu); block 128 threads,
// one warpgroup whose warp w holds MMA rows 16 w.. (the rows p0's warp w holds). Per tile:
//   S (64 rows x 64 keys) = Q K^T: HD / 16 wgmma m64n64k16, Q from registers (p0's fragments), K from
//   shared memory; then p0's softmax of the tile on S in registers, P packed to bf16 fragments;
//   O (64 x HD) += P V: four wgmma m64n{HD}k16, P from registers, V from shared memory (N-major).
// K and V tiles arrive by cp.async in wgmma's 128-byte swizzled layout: a tile is HD / 64 column blocks
// of [KT rows][64 dims], 128 bytes a row, 16-byte chunk c of row r at c ^ (r mod 8), 8-row groups 1024
// bytes apart; K is read K-major (rows are keys, k runs along dims), V N-major (k runs along keys).
// Dynamic shared memory: two stages of K and V, the CTA's running O (fp32), 1024 bytes for alignment.
#include "attention.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// a shared-memory matrix descriptor, 128-byte swizzle: start, leading and stride byte offsets
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return ((addr & 0x3FFFF) >> 4) | ((unsigned long long) (lbo >> 4) << 16) | ((unsigned long long) (sbo >> 4) << 32) | (1ull << 62);
}

// byte offset of 16-byte chunk ch (dims 8 ch..) of row r in a tile of 64-dim column blocks
__device__ __forceinline__ unsigned wg_chunk(int r, int ch) {
    return (unsigned) ((ch >> 3) * (KT * 128) + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

// keeps the compiler from moving reads or writes of an accumulator across the wgmma fence or wait beside it
__device__ __forceinline__ void wg_pin(float &x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void wg_pin_r(unsigned &x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ void wg_pin_l(unsigned long long &x) { asm volatile("" : "+l"(x)::"memory"); }

#define WG_R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_W8(i) "=f"(d[i]), "=f"(d[i + 1]), "=f"(d[i + 2]), "=f"(d[i + 3]), "=f"(d[i + 4]), "=f"(d[i + 5]), "=f"(d[i + 6]), "=f"(d[i + 7])
#define WG_L32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define WG_L64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
               "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"

// P V: d (64 x N fp32, this thread's N / 2) += a (64 x 16 bf16, p0's fragment registers) * B (16 x N, descriptor b),
// B N-major (rows of the tile run along k); accumulate 0: d = a * B (a split's first chunk: its o starts from zero)
template <int N, int TRANS>
__device__ __forceinline__ void wg_mma(float *d, const unsigned *a, unsigned long long b, int accumulate);

// scores, the first chunk: d = a * B (the accumulator's first add of a sum starts from zero: the same bits)
__device__ __forceinline__ void wg_scores0(float *d, const unsigned *a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_L32
                 ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : WG_W8(0), WG_W8(8), WG_W8(16), WG_W8(24) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// scores: d = a * B (accumulate 0: the first chunk starts from zero, as the accumulator's first add of a sum does) or d += a * B
__device__ __forceinline__ void wg_scores(float *d, const unsigned *a, unsigned long long b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_L32
                 ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wg_mma<64, 1>(float *d, const unsigned *a, unsigned long long b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_L32
                 ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wg_mma<128, 1>(float *d, const unsigned *a, unsigned long long b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_L64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24), WG_R8(32), WG_R8(40), WG_R8(48), WG_R8(56)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit_wait() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

template <int HD, int WGS, int VLBO, int VSBO>
__device__ __forceinline__ void attention_wgmma_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        int heads, int kvHeads, int blockSize, float scale) {
    constexpr int KS = HD / 16, DN = HD / 8, THREADS = 128 * WGS;
    constexpr unsigned STAGE = 2u * KT * HD * 2; // K then V of one tile, bytes
    const int *d = desc + blockIdx.x * 8;
    const int row0 = d[0], rows = d[1], pos0 = d[2], tab = d[3], s0 = d[4], s1 = d[5];
    dependent_launch_entry();
    const int g = blockIdx.y, G = heads / kvHeads;
    const float cl2 = attn_c(scale);
    // warp: the first of this warp's 16 MMA rows (warpgroup w takes rows 64 w..)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
    const int maxPos = pos0 + rows - 1;
    // this thread's two MMA rows and their Q fragments
    const AttnRows<HD> tr(qkv, qkvStride, row0, rows, pos0, g, G, warp * 16, gr, tq);
    const int (&mr)[2] = tr.mr, (&pos)[2] = tr.pos;
    const bool (&valid)[2] = tr.valid;
    const unsigned (&qf)[KS][4] = tr.qf;
    const bool upper = warp * 16 + 8 < rows * G;
    // whether the warp's 16 rows all hold a row, and the first one's position: tiles wholly before it need no mask
    const bool full = warp * 16 + 16 <= rows * G;
    const int firstPos = pos0 + warp * 16 / G;
    constexpr int KSTEP = THREADS / DN;
    static_assert(KSTEP % 8 == 0, "a thread's keys KSTEP apart share their swizzle (key mod 8)");
    const int lk = threadIdx.x / DN, ch = threadIdx.x % DN, bsh = __ffs(blockSize) - 1;
    const unsigned blockRows = 2u * kvHeads * blockSize, headRow = (unsigned) g * blockSize, vRows = (unsigned) kvHeads * blockSize;
    const bf16 *column = pool + ch * 8, *vColumn = column + (long) vRows * HD;
    const int *table = tables + tab;
    const int firstKey = split_start(s0), lastKey = min(split_start(s1), maxPos + 1);
    const int tiles = lastKey > firstKey ? (lastKey - firstKey + KT - 1) / KT : 0;
    const unsigned raw = (unsigned) __cvta_generic_to_shared(attn_smem), base = (raw + 1023) & ~1023u;
    float *orun = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(attn_smem) + (base - raw) + 2 * STAGE);
    // one 16-byte copy, zeros where the key is past the last
    auto copy = [&](unsigned dst, const void *src, bool in) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(in ? 16 : 0));
    };
    const unsigned off0 = wg_chunk(lk, ch); // key lk + r's chunk lies r * 128 bytes further (r a multiple of 8)
    // tile i into stage i & 1: this thread's chunk ch of keys lk, lk + KSTEP, ...
    auto load = [&](int i) {
        const unsigned ks = base + (i & 1) * STAGE + off0, vs = ks + STAGE / 2;
        const int k0 = firstKey + i * KT + lk;
        if (blockSize >= 2 * KSTEP) {
            // keys lk + 2 KSTEP m and lk + 2 KSTEP m + KSTEP share a KV block (tiles start at multiples of 64, lk < KSTEP):
            // one table read and one address for both, the second KSTEP rows further
            #pragma unroll
            for (int key = 0; key < KT; key += 2 * KSTEP) {
                const int kj = k0 + key;
                const bool in = kj < lastKey, in2 = kj + KSTEP < lastKey;
                const unsigned row = in ? __ldg(table + (kj >> bsh)) * blockRows + headRow + (kj & (blockSize - 1)) : 0u;
                const bf16 *k = static_cast<const bf16 *>(mad_wide(row, 2 * HD, column)), *v = static_cast<const bf16 *>(mad_wide(row, 2 * HD, vColumn));
                copy(ks + key * 128, k, in);
                copy(vs + key * 128, v, in);
                copy(ks + (key + KSTEP) * 128, k + KSTEP * HD, in2);
                copy(vs + (key + KSTEP) * 128, v + KSTEP * HD, in2);
            }
        } else {
            #pragma unroll
            for (int key = 0; key < KT; key += KSTEP) {
                const int kj = k0 + key;
                const bool in = kj < lastKey;
                const unsigned row = in ? __ldg(table + (kj >> bsh)) * blockRows + headRow + (kj & (blockSize - 1)) : 0u;
                copy(ks + key * 128, mad_wide(row, 2 * HD, column), in);
                copy(vs + key * 128, mad_wide(row, 2 * HD, vColumn), in);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };

    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f}, ms[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f};
    // os: the split's o (this thread's HD / 2 values, as wgmma lays them out); S: a tile's scores
    float os[DN * 4], S[32];
    // softmax of the tile at t0 on S (p0's arithmetic): the split's max and sum move on, P fragments out
    // (pf[j]: keys 16 j .. 16 j + 15), alpha the factor of the split's o before this tile
    auto softmax = [&](int t0, unsigned (&pf)[4][4], float (&alpha)[2]) {
        if (!full || t0 + KT - 1 > firstPos) {
            #pragma unroll
            for (int c = 0; c < 8; c++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int h = e >> 1, key = t0 + 8 * c + 2 * tq + (e & 1);
                    S[4 * c + e] = (valid[h] && key <= pos[h] && (h == 0 || upper)) ? S[4 * c + e] : -INFINITY;
                }
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
        #pragma unroll
        for (int c = 0; c < 32; c++) mx[(c & 3) >> 1] = fmaxf(mx[(c & 3) >> 1], S[c]);
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            if (h == 1 && !upper) break;
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        }
        float mu[2], q[2][4] = {};
        attn_new_max(ms, mx, cl2, upper, mu, alpha);
        #pragma unroll
        for (int c = 0; c < 32; c++) S[c] = (c & 3) >= 2 && !upper ? 0.f : attn_p(S[c], cl2, mu[(c & 3) >> 1]);
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            if (h == 1 && !upper) break;
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
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            if (h == 1 && !upper) break;
            ls[h] = __fadd_rn(__fmul_rn(ls[h], alpha[h]), attn_tile_sum(q[h]));
        }
    };
    // the descriptors of tile i's K chunks (kd) and V chunks (vd), made before the fence that precedes their wgmmas
    unsigned long long kd[KS], vd[4];
    auto descriptors = [&](int i) {
        const unsigned ks = base + (i & 1) * STAGE, vs = ks + STAGE / 2;
        #pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            kd[kk] = wg_desc(ks + (kk >> 2) * (KT * 128) + (kk & 3) * 32, 16, 1024);
            wg_pin_l(kd[kk]);
        }
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            vd[j] = wg_desc(vs + j * 16 * 128, VLBO, VSBO);
            wg_pin_l(vd[j]);
        }
    };
    auto scores = [&]() {
        wg_scores0(S, qf[0], kd[0]);
        #pragma unroll
        for (int kk = 1; kk < KS; kk++) wg_scores(S, qf[kk], kd[kk], 1);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    auto landed = [&]() {
        // this thread's copies are visible to the async proxy (wgmma reads through it), then everyone's
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
    };
    // Software pipeline: iteration i issues tile i + 1's scores and tile i's P V back to back, then does
    // tile i + 1's softmax while the tensor cores run P V; tiles i + 1 and i + 2 load meanwhile (two stages).
    unsigned pf[4][4], pn[4][4];
    float alpha[2], an[2];
    if (tiles > 0) {
        load(0);
        if (tiles > 1) {
            load(1);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        landed();
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
        if (next) {
            asm volatile("cp.async.wait_group 0;\n" ::);
            landed();
        }
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
        wg_fence();
        scores();
        #pragma unroll
        for (int j = 0; j < 4; j++) wg_mma<HD, 1>(os, pf[j], vdi[j], j > 0 || !split_begins(t0));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
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
        if (splitEnds) {
            const bool firstSplit = split_of(t0) == s0;
            // the run's O: this thread's values c = 4 j .. 4 j + 3 at float4 j * THREADS + thread (conflict-free)
            #pragma unroll
            for (int j = 0; j < DN; j++) {
                float4 *o = reinterpret_cast<float4 *>(orun) + j * THREADS + threadIdx.x;
                float4 v = firstSplit ? make_float4(0.f, 0.f, 0.f, 0.f) : *o;
                v.x = fold_value(v.x, fa[0], os[4 * j], fb[0]);
                v.y = fold_value(v.y, fa[0], os[4 * j + 1], fb[0]);
                v.z = fold_value(v.z, fa[1], os[4 * j + 2], fb[1]);
                v.w = fold_value(v.w, fa[1], os[4 * j + 3], fb[1]);
                *o = v;
            }
        }
        __syncthreads(); // stage i & 1 is free for tile i + 2
        if (i + 2 < tiles) load(i + 2);
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            #pragma unroll
            for (int r = 0; r < 4; r++) pf[j][r] = pn[j][r];
        }
        alpha[0] = an[0];
        alpha[1] = an[1];
    };
    #pragma unroll 1
    for (int i = 0; i < tiles; i++) step(i, i + 1 < tiles);
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        if (!valid[h]) continue;
        int r = mr[h] / G, qh = g * G + mr[h] % G;
        bf16 *op = out + (long) (row0 + r) * heads * HD + (long) qh * HD;
        #pragma unroll
        for (int c = 0; c < DN; c++) {
            float4 v = reinterpret_cast<const float4 *>(orun)[c * THREADS + threadIdx.x];
            float o0 = h ? v.z : v.x, o1 = h ? v.w : v.y;
            *reinterpret_cast<__nv_bfloat162 *>(op + 8 * c + 2 * tq) = __floats2bfloat162_rn(__fdiv_rn(o0, L[h]), __fdiv_rn(o1, L[h]));
        }
    }
}
#endif

// warpgroups a CTA (64 MMA rows each, sharing the K/V stages): two measured slower than one on the H200
// (8K prefill, 33B shape: 3.98 vs 3.74 ms; one CTA an SM instead of two)
#ifndef WG_GROUPS
#define WG_GROUPS 1
#endif
#ifndef WG_VLBO
#define WG_VLBO 8192
#define WG_VSBO 1024
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_BODY(hd) attention_wgmma_impl<hd, WG_GROUPS, WG_VLBO, WG_VSBO>(qkv, qkvStride, out, pool, tables, desc, heads, kvHeads, blockSize, scale);
#else
#define WG_BODY(hd) __trap();
#endif
// p0's signature (partO and partML unused: prefill writes out)
#define ATTENTION_WGMMA(hd) \
    extern "C" __global__ void __launch_bounds__(128 * WG_GROUPS) attention_hd##hd##_p0g( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        WG_BODY(hd) \
    }
// head dim 128 only (the family's): the kernel is written for any multiple of 64, but 64 has not run on a GPU yet
ATTENTION_WGMMA(128)

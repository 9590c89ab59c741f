#include "attention.cuh"

// attention_merge, attention_merge_wide: fold each decode row's split states in split order (exactly the
// prefill CTA's fold) and write out = bf16(O / L). The fold is a chain split after split, so the
// parallelism is in the dims. attention_merge: grid (decode rows, heads), a warp per slice of 32 dims (a lane a
// dim; slices = ceil(headDim / 32)); attention_merge_wide (rows of many splits, below): a warp per 128 dims, four a
// lane. (A CTA per 32-dim slice with 16 stages, the kernel before the wide one, took ~1.4 us a chunk of 32 splits at
// 128K whatever the depth of its stages, ncu on the H200.) Both give the same bits.
// The splits' o slices and (m, l) stream through STAGES shared-memory stages of CHUNK splits with cp.async
// (loads in flight without registers). The running max is a prefix max (exact in any order and any
// chunking), so the warp computes a chunk's factors a = exp(M_before - M_after) and b = exp(m_split -
// M_after) in parallel, one split a lane, then each lane folds its dim (and L) down the chunk in split
// order with them: only O = O a + o b runs split after split.
// cdesc per row: [first slot, splits, output row]. Dynamic shared memory: MERGE_WARP_BYTES(CHUNK, STAGES) a warp.

// The factors of a chunk of cnt split states (their (m, l) in mlc) against the run's max M: split c0 + lane's max,
// the prefix max over the chunk, M before and after, into the table f (a float4 a split: a, b, l), which every lane
// then reads with one broadcast load a split (with three shuffles a split the fold took ~100 cycles a split,
// measured by ncu at 128K). M becomes the run's max after the chunk.
template <int CHUNK>
__device__ __forceinline__ void merge_factors(const float2 *mlc, int cnt, float4 *f, float &M) {
    const int lane = threadIdx.x & 31;
    const float2 st = lane < cnt ? mlc[lane] : make_float2(-INFINITY, 0.f);
    float pm = st.x;
    #pragma unroll
    for (int off = 1; off < CHUNK; off <<= 1) {
        const float t = __shfl_up_sync(0xffffffffu, pm, off);
        if (lane >= off) pm = fmaxf(pm, t);
    }
    const float after = fmaxf(M, pm);
    float before = __shfl_up_sync(0xffffffffu, after, 1);
    if (lane == 0) before = M;
    f[lane] = make_float4(attn_factor(before, after), attn_factor(st.x, after), st.y, 0.f);
    M = __shfl_sync(0xffffffffu, after, cnt - 1); // the run's max after the chunk
    __syncwarp();
}

// One warp folds a chunk of cnt split states into its run (M, L, O) (this lane's dim): the chunk's (m, l) in mlc
// and its o slices in oc (32 floats a split) in shared memory, f the factor table: the loop is then six instructions
// a split (one warp a scheduler has no other warp to hide latency behind). Returns once the warp has read the chunk
// and the table.
template <int CHUNK>
__device__ __forceinline__ void merge_chunk(const float2 *mlc, const float *oc, int cnt, float4 *f, float &M, float &L, float &O) {
    merge_factors<CHUNK>(mlc, cnt, f, M);
    const float *b = oc + (threadIdx.x & 31);
    auto fold = [&](int s) {
        const float4 g = f[s];
        L = fold_value(L, g.x, g.z, g.y);
        O = fold_value(O, g.x, b[s * 32], g.y);
    };
    if (cnt == CHUNK) {
        #pragma unroll
        for (int s = 0; s < CHUNK; s++) fold(s);
    } else {
        for (int s = 0; s < cnt; s++) fold(s);
    }
    __syncwarp();
}

template <int CHUNK, int STAGES>
__device__ __forceinline__ void merge_slice(const float *partO, const float *partML, const int *d, bf16 *out, int heads, int HD,
                                            int qh, int slice, float *region) {
    // the warp's region (MERGE_WARP_BYTES): the stages' o slices, their (m, l), the factor table
    float *buf = region;
    float2 *ml = reinterpret_cast<float2 *>(buf + STAGES * CHUNK * 32);
    float4 *f = reinterpret_cast<float4 *>(ml + STAGES * CHUNK);
    const int first = d[0], n = d[1], row = d[2], lane = threadIdx.x & 31;
    const int dim0 = slice * 32, width = min(32, HD - dim0);
    const int chunks = (n + CHUNK - 1) / CHUNK;
    if (n == 0) return; // a row its decode CTA folded itself (StepPlan: part < 0)
    auto load = [&](int c) {
        if (c < chunks) {
            const int c0 = c * CHUNK, cnt = min(CHUNK, n - c0);
            float *stage = buf + (c % STAGES) * CHUNK * 32;
            const int q = width / 4;
            for (int e = lane; e < cnt * q; e += 32) {
                const int sp = e / q, part = e % q;
                const float *src = partO + ((long) (first + c0 + sp) * heads + qh) * HD + dim0 + 4 * part;
                const unsigned dst = (unsigned) __cvta_generic_to_shared(stage + sp * 32 + 4 * part);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
            }
            if (lane < cnt) {
                const float *src = partML + ((long) (first + c0 + lane) * heads + qh) * 2;
                const unsigned dst = (unsigned) __cvta_generic_to_shared(&ml[(c % STAGES) * CHUNK + lane]);
                asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(dst), "l"(src));
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    #pragma unroll
    for (int c = 0; c < STAGES - 1; c++) load(c);
    float M = -INFINITY, L = 0.f, O = 0.f;
    for (int c = 0; c < chunks; c++) {
        load(c + STAGES - 1);
        const int cnt = min(CHUNK, n - c * CHUNK);
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 1));
        __syncwarp(); // every lane's copies of the stage have landed
        merge_chunk<CHUNK>(ml + (c % STAGES) * CHUNK, buf + (c % STAGES) * CHUNK * 32, cnt, f, M, L, O); // load(c + STAGES) refills the stage after
    }
    if (lane < width) out[(long) row * heads * HD + (long) qh * HD + dim0 + lane] = __float2bfloat16_rn(__fdiv_rn(O, L));
}

// a warp's stages: CHUNK splits of 32 dims of o and their (m, l), then the chunk's table of factors
#define MERGE_WARP_BYTES(chunk, stages) ((stages) * (chunk) * (32 * 4 + 8) + 512)

extern "C" __global__ void __launch_bounds__(128) attention_merge(const float *partO, const float *partML, const int *cdesc, bf16 *out, int heads, int HD) {
    constexpr int CHUNK = 16, STAGES = 4;
    const int *d = cdesc + blockIdx.x * 3, warp = threadIdx.x >> 5;
    dependent_launch_entry();
    merge_slice<CHUNK, STAGES>(partO, partML, d, out, heads, HD, blockIdx.y, warp,
                               reinterpret_cast<float *>(attn_smem) + warp * (MERGE_WARP_BYTES(CHUNK, STAGES) / 4));
}

// attention_merge_wide: the same fold with four dims a lane, so one warp folds 128 dims of a row's head: each split's
// 512 bytes of o come in one 16-byte copy a lane (one coalesced request, no index arithmetic a piece), and a split's
// fold is four independent chains a lane behind the same two shared loads (the factors, then o's float4): about a
// fifth of the instructions of a warp per 32 dims for a head's dims, with four chains to hide latency behind instead of
// one. grid (decode rows, heads * ceil(headDim / 128)), block 32 (headDim % 4 == 0). The same bits.
#define MERGE_WIDE_CHUNK 32
#define MERGE_WIDE_STAGES 4
// its stages: CHUNK splits of 128 dims of o and their (m, l), then the factor table
#define MERGE_WIDE_BYTES (MERGE_WIDE_STAGES * MERGE_WIDE_CHUNK * (128 * 4 + 8) + 512)

extern "C" __global__ void __launch_bounds__(32) attention_merge_wide(const float *partO, const float *partML, const int *cdesc, bf16 *out, int heads, int HD) {
    constexpr int CHUNK = MERGE_WIDE_CHUNK, STAGES = MERGE_WIDE_STAGES;
    const int groups = (HD + 127) / 128, qh = blockIdx.y / groups, lane = threadIdx.x & 31;
    const int *d = cdesc + blockIdx.x * 3;
    dependent_launch_entry();
    const int first = d[0], n = d[1], row = d[2], dim = (blockIdx.y % groups) * 128 + 4 * lane;
    if (n == 0) return; // a row its decode CTA folded itself (StepPlan: part < 0)
    float4 *buf = reinterpret_cast<float4 *>(attn_smem);
    float2 *ml = reinterpret_cast<float2 *>(buf + STAGES * CHUNK * 32);
    float4 *f = reinterpret_cast<float4 *>(ml + STAGES * CHUNK);
    const bool live = dim < HD;
    const long stride = (long) heads * HD; // floats from one split's state to the next
    const float *o0 = partO + ((long) first * heads + qh) * HD + (live ? dim : 0);
    const float *ml0 = partML + ((long) first * heads + qh) * 2;
    const int chunks = (n + CHUNK - 1) / CHUNK;
    auto load = [&](int c) {
        if (c < chunks) {
            const int c0 = c * CHUNK, cnt = min(CHUNK, n - c0);
            float4 *stage = buf + (c % STAGES) * CHUNK * 32;
            if (live) {
                const float *src = o0 + (long) c0 * stride;
                for (int sp = 0; sp < cnt; sp++, src += stride) {
                    const unsigned dst = (unsigned) __cvta_generic_to_shared(stage + sp * 32 + lane);
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
                }
            }
            if (lane < cnt) {
                const unsigned dst = (unsigned) __cvta_generic_to_shared(&ml[(c % STAGES) * CHUNK + lane]);
                asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(dst), "l"(ml0 + (long) (c0 + lane) * heads * 2));
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    #pragma unroll
    for (int c = 0; c < STAGES - 1; c++) load(c);
    float M = -INFINITY, L = 0.f;
    float4 O = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int c = 0; c < chunks; c++) {
        load(c + STAGES - 1);
        const int cnt = min(CHUNK, n - c * CHUNK);
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 1));
        __syncwarp(); // every lane's copies of the stage have landed
        merge_factors<CHUNK>(ml + (c % STAGES) * CHUNK, cnt, f, M);
        const float4 *b = buf + (c % STAGES) * CHUNK * 32 + lane;
        auto fold = [&](int s) {
            const float4 g = f[s], o = b[s * 32];
            L = fold_value(L, g.x, g.z, g.y);
            O = make_float4(fold_value(O.x, g.x, o.x, g.y), fold_value(O.y, g.x, o.y, g.y), fold_value(O.z, g.x, o.z, g.y),
                            fold_value(O.w, g.x, o.w, g.y));
        };
        if (cnt == CHUNK) {
            #pragma unroll 8
            for (int s = 0; s < CHUNK; s++) fold(s);
        } else {
            for (int s = 0; s < cnt; s++) fold(s);
        }
        __syncwarp(); // the warp has read the stage and the table: load(c + STAGES) may refill it
    }
    if (live) {
        bf16 *dst = out + (long) row * heads * HD + (long) qh * HD + dim;
        reinterpret_cast<__nv_bfloat162 *>(dst)[0] = __floats2bfloat162_rn(__fdiv_rn(O.x, L), __fdiv_rn(O.y, L));
        reinterpret_cast<__nv_bfloat162 *>(dst)[1] = __floats2bfloat162_rn(__fdiv_rn(O.z, L), __fdiv_rn(O.w, L));
    }
}

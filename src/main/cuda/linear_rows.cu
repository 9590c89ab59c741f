// linear_rows: y (n, nOut) = bf16(x (n, k) @ W^T) for few rows (n <= 64: decode steps), W (nOut, k) and x
// row-major bf16, k % (64 boxes) == 0, on Hopper's tensor cores (sm_90a: TMA and wgmma; other GPUs use cuBLASLt).
//
// The bits are cuBLASLt's. Every split-free algorithm cuBLASLt offers for these shapes gives an output
// the bits that one fp32 accumulator gives when the tensor cores feed it k's 16-wide chunks in order,
// from zero: an own kernel doing that, with mma.sync or wgmma, gave cuBLASLt's bits on every weight shape
// of the 3B and 33B models at 1 to 64 rows (LinearRowsContractTest). So this kernel may stand in for the
// pinned cuBLASLt algorithms in decode steps; the backend checks the equality on each weight shape before
// it uses it (backend/cuda/Linear).
//
// Its business is the weight stream, built as cuBLASLt's own few-row kernels are: one CTA (one warpgroup)
// takes RB weight rows (64, or 16 or 32 in a wgmma of 64 whose other rows are not written); the weights and x
// come by TMA in boxes of 64 keys (one tensor-map copy a box,
// 128-byte swizzled, zeros past nOut and n, completion counted in bytes on the stage's mbarrier), 1, 2
// or 4 boxes a stage, many stages in flight; each box is four wgmma m64nNk16 (N = 8 NT) into the same
// accumulators, issued back to back; a slot is refilled as soon as the wgmmas that read it are done. The first stages' weights are
// requested before the kernel waits on the previous one (programmatic dependent launch).
//
// Kernel linear_rows_n{NT}_b{BOXES}_s{STAGES}[_r{RB}](mapX, n, k, mapW, nOut, y): mapX and mapW are device
// copies of the tensor maps of x (box 8 NT rows x 64) and W (box RB x 64); a stage is BOXES boxes of each
// (64 BOXES keys); grid ceil(nOut / RB), block 128, dynamic shared memory STAGES * BOXES * (128 RB + 1024 NT)
// + 128 (64 - RB) (the last box's overread) + 1024 (alignment) + 8 STAGES (mbarriers) bytes.
//
// linear_rows_paired_n1_b{BOXES}_s{STAGES}(mapX, n, k, mapW, nOut, y, mode, group, span, pair, cos, sin, positions,
// qHeads, kvHeads, headDim, pool, slotMap, blockSize): the same weight stream and accumulators (so the same bits), with
// each CTA's 64 weight rows taken as two halves of 32 whose outputs its epilogue combines, so that a small kernel after
// the GEMM falls away: CTA c takes rows [a, a + 32) and [a + pair, a + pair + 32), a = (c / group) * span + (c % group) * 32
// (mapW's box is 32 rows), rounds its outputs to bf16 as linear_rows writes them, stages them in shared memory, then
//   mode 1 (swiglu, group 1, span 32, pair = width): W is gate|up (2 width rows); y (n, width) = swiglu's output, as
//          the swiglu kernel computes it from the gate|up rows (swiglu.cuh);
//   mode 2 (rope_kv_write, group headDim / 64, span headDim, pair headDim / 2; headDim 64 or 128): W is q|k|v; y (n, nOut)
//          = the qkv rows after rope_kv_write, and K and V in the pool at slotMap, as rope_kv_write writes them (rope.cuh).
// Grid nOut / 64 (nOut a multiple of 64), block 128, the shared memory of the 64-row variant.
//
// linear_rows_fp8_n{NT}_b{BOXES}_s{STAGES}[_r{RB}](mapX, n, k, mapW, nOut, y, scales, blockRows, blockCols): the same kernel
// over an fp8 weight (E4M3 (nOut, k), scales (ceil(nOut / blockRows), ceil(k / blockCols)) fp32, blockCols a multiple of 16
// or >= k): mapW is the fp8 matrix's tensor map (box RB x 64 bytes, no swizzle), so the weight stream is half the bytes; each
// stage's boxes are expanded in shared memory to the bf16 values bf16(decode(q) * scale) (fp8.cuh), written in the 128-byte
// swizzle the wgmma reads (two buffers, a stage's expansion overlapping the previous stage's wgmmas), and go through the same
// wgmmas: the bits of cuBLASLt over the expanded matrix (dequant_fp8), which the backend checks as for bf16. Shared memory:
// the bf16 variant's with 64 RB bytes a box for the weights (not 128 RB), plus 2 BOXES 128 RB for the expanded boxes.
#include "rope.cuh"
#include "swiglu.cuh"
#include "linear_rows.cuh"

// A paired CTA's epilogue (see above); mode 0: none (plain linear_rows).
struct LrPaired {
    int mode, group, span, pair;
    const float *cos, *sin;
    const int *positions;
    int qHeads, kvHeads, headDim;
    bf16 *pool;
    const int *slotMap;
    int blockSize;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// shared memory descriptor of a K-major tile in 128-byte swizzle: 8-row groups 1024 bytes apart
__device__ __forceinline__ unsigned long long lr_desc(unsigned addr) {
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long) (1024 >> 4) << 32) | (1ull << 62);
}

// An fp8 stage's weight boxes (BOXES of RB rows x 64 codes, row-major, 64 bytes a row, at w8) expanded into bf16 boxes at cb
// (RB rows x 128 bytes each, 128-byte swizzled as TMA writes the bf16 weights: 16-byte chunk q of row r at chunk q ^ (r % 8)
// of its 8-row group of 1024 bytes). A thread takes LR_UNITS units of 16 codes, unit m being u = thread + 128 m: box
// u / (4 RB), row (u / 4) % RB, codes 16 (u % 4) of its 64; their scales come in s (lr_scales, loaded a stage ahead).
template <int RB, int BOXES>
struct LrUnits {
    static constexpr int N = BOXES * RB * 4 / 128;
    static_assert(N * 128 == BOXES * RB * 4, "a stage's units of 16 codes are a whole number a thread");
};

// the scales of this thread's units in the stage whose first key is key0 (rows from row0; 0 past nOut)
template <int RB, int BOXES>
__device__ __forceinline__ void lr_scales(float (&s)[LrUnits<RB, BOXES>::N], int row0, int nOut, int key0, const LrFp8 &f8, int sc) {
    #pragma unroll
    for (int m = 0; m < LrUnits<RB, BOXES>::N; m++) {
        const int u = threadIdx.x + 128 * m, j = u / (RB * 4), row = row0 + (u >> 2) % RB, key = key0 + 64 * j + 16 * (u & 3);
        s[m] = row < nOut ? __ldg(f8.scales + (long) (row / f8.blockRows) * sc + key / f8.blockCols) : 0.f;
    }
}

template <int RB, int BOXES>
__device__ __forceinline__ void lr_expand(const unsigned char *w8, unsigned char *cb, const float (&s)[LrUnits<RB, BOXES>::N]) {
    #pragma unroll
    for (int m = 0; m < LrUnits<RB, BOXES>::N; m++) {
        const int u = threadIdx.x + 128 * m, j = u / (RB * 4), r = (u >> 2) % RB, c = u & 3;
        const uint4 raw = *reinterpret_cast<const uint4 *>(w8 + j * RB * 64 + r * 64 + c * 16);
        const float sm = s[m];
        uint4 lo, hi;
        lo.x = fp8x2_weight(raw.x & 0xFFFF, sm); lo.y = fp8x2_weight(raw.x >> 16, sm);
        lo.z = fp8x2_weight(raw.y & 0xFFFF, sm); lo.w = fp8x2_weight(raw.y >> 16, sm);
        hi.x = fp8x2_weight(raw.z & 0xFFFF, sm); hi.y = fp8x2_weight(raw.z >> 16, sm);
        hi.z = fp8x2_weight(raw.w & 0xFFFF, sm); hi.w = fp8x2_weight(raw.w >> 16, sm);
        unsigned char *rowAt = cb + j * RB * 128 + (r >> 3) * 1024 + (r & 7) * 128;
        *reinterpret_cast<uint4 *>(rowAt + (((2 * c) ^ (r & 7)) << 4)) = lo;
        *reinterpret_cast<uint4 *>(rowAt + (((2 * c + 1) ^ (r & 7)) << 4)) = hi;
    }
}

// one stage: its four 16-wide chunks of k as four wgmmas into the same accumulators, back to back in one
// asm statement (the descriptors step 32 bytes along k inside the swizzled rows)
template <int N>
__device__ __forceinline__ void lr_wgmma4(float *d, unsigned long long da, unsigned long long db);

// the asm text: SHAPE, the accumulators' operand list REGS, the descriptors' operands A and B
#define LR_WG(SHAPE, REGS) "wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 " REGS ", a, b, p, 1, 1, 0, 0;\n"
#define LR_STEP "add.s64 a, a, 2;\nadd.s64 b, b, 2;\n"
#define LR_WG4(SHAPE, REGS, A, B) \
    "{\n.reg .pred p;\n.reg .b64 a, b;\nsetp.ne.b32 p, 1, 0;\nmov.b64 a, " A ";\nmov.b64 b, " B ";\n" \
    LR_WG(SHAPE, REGS) LR_STEP LR_WG(SHAPE, REGS) LR_STEP LR_WG(SHAPE, REGS) LR_STEP LR_WG(SHAPE, REGS) "}\n"
#define LR_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])

template <>
__device__ __forceinline__ void lr_wgmma4<8>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile(LR_WG4("m64n8k16", "{%0,%1,%2,%3}", "%4", "%5")
                 : LR_D4(0) : "l"(da), "l"(db) : "memory");
}

template <>
__device__ __forceinline__ void lr_wgmma4<16>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile(LR_WG4("m64n16k16", "{%0,%1,%2,%3,%4,%5,%6,%7}", "%8", "%9")
                 : LR_D4(0), LR_D4(4) : "l"(da), "l"(db) : "memory");
}

template <>
__device__ __forceinline__ void lr_wgmma4<32>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile(LR_WG4("m64n32k16", "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}", "%16", "%17")
                 : LR_D4(0), LR_D4(4), LR_D4(8), LR_D4(12) : "l"(da), "l"(db) : "memory");
}

template <>
__device__ __forceinline__ void lr_wgmma4<64>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile(LR_WG4("m64n64k16", "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}", "%32", "%33")
                 : LR_D4(0), LR_D4(4), LR_D4(8), LR_D4(12), LR_D4(16), LR_D4(20), LR_D4(24), LR_D4(28) : "l"(da), "l"(db) : "memory");
}

// rows a and a + pair of a paired CTA's outputs meet in its epilogue
__device__ __forceinline__ void lr_paired_epilogue(const LrPaired &pr, const bf16 *stg, int xn, int n, int nOut, bf16 *y) {
    const int c = blockIdx.x, a = (c / pr.group) * pr.span + (c % pr.group) * 32;
    for (int t = threadIdx.x; t < 32 * n; t += blockDim.x) {
        const int j = t & 31, r = t >> 5;
        const float lo = __bfloat162float(stg[j * xn + r]), hi = __bfloat162float(stg[(32 + j) * xn + r]);
        if (pr.mode == 1) {
            y[(long) r * pr.pair + a + j] = __float2bfloat16_rn(swiglu1(lo, hi));
            continue;
        }
        const int hd = pr.headDim, half = hd / 2, h = a / hd, i = a % hd + j;
        float nlo = lo, nhi = hi;
        if (h < pr.qHeads + pr.kvHeads) {
            const long t2 = (long) pr.positions[r] * half + i;
            const float cs = pr.cos[t2], sn = pr.sin[t2];
            nlo = rope_lo(lo, hi, cs, sn);
            nhi = rope_hi(lo, hi, cs, sn);
        }
        const bf16 blo = __float2bfloat16_rn(nlo), bhi = __float2bfloat16_rn(nhi);
        y[(long) r * nOut + a + j] = blo;
        y[(long) r * nOut + a + j + pr.pair] = bhi;
        if (h >= pr.qHeads) {
            const bool isV = h >= pr.qHeads + pr.kvHeads;
            const int kvh = h - pr.qHeads - (isV ? pr.kvHeads : 0);
            const long phys = pr.slotMap[r], blk = phys / pr.blockSize, off = phys % pr.blockSize, kvDim = (long) pr.kvHeads * hd;
            bf16 *dst = pr.pool + (blk * 2 + (isV ? 1 : 0)) * pr.blockSize * kvDim + ((long) kvh * pr.blockSize + off) * hd;
            dst[i] = blo;
            dst[i + half] = bhi;
        }
    }
}

template <int NT, int BOXES, int STAGES, int RB, bool PAIRED, bool FP8>
__device__ __forceinline__ void linear_rows_impl(const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y, const LrPaired &pr,
                                                 const LrFp8 &f8) {
    // a stage: BOXES boxes of 64 keys of W (RB rows each; W8 bytes a box as loaded, WB as the wgmma reads it), then as many
    // of x; KS keys a stage. The wgmma's A (64 rows) reads 64 - RB rows past a box of RB < 64 (the next boxes, or PAD bytes
    // after the last stage or expansion buffer): their outputs are never written. FP8: CB bytes of two expansion buffers
    // after the stages
    constexpr int XN = 8 * NT, WB = RB * 64 * 2, W8 = FP8 ? RB * 64 : WB, XB = XN * 64 * 2, SB = BOXES * (W8 + XB), KS = 64 * BOXES,
            PAD = (64 - RB) * 128, CB = FP8 ? 2 * BOXES * WB : 0;
    const int o0 = blockIdx.x * RB, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, blocks = k / KS;
    // a paired CTA's two 32-row halves (PAIRED: RB is 64, mapW's box 32 rows; the halves lie 4 KiB apart, whole
    // 1024-byte swizzle groups, so the wgmma reads them as one 64-row tile)
    const int a0 = PAIRED ? (blockIdx.x / pr.group) * pr.span + (blockIdx.x % pr.group) * 32 : o0, a1 = PAIRED ? a0 + pr.pair : 0;
    auto loadW = [&](unsigned dst, int col, unsigned b) {
        lr_tma(dst, mapW, col, a0, b);
        if (PAIRED) lr_tma(dst + 32 * 128, mapW, col, a1, b);
    };
    const unsigned base = ((unsigned) __cvta_generic_to_shared(lr_smem) + 1023) & ~1023u, bars = base + STAGES * SB + CB + PAD;
    auto bar = [&](int b) { return bars + 8 * (b % STAGES); };
    auto slot = [&](int b) { return base + (b % STAGES) * SB; };
    // where the wgmma reads block b's weights: the stage's slot, or (FP8) the expansion buffer of b's parity
    auto wtile = [&](int b) { return FP8 ? base + STAGES * SB + (b & 1) * BOXES * WB : slot(b); };
    unsigned char *const generic = lr_smem + (base - (unsigned) __cvta_generic_to_shared(lr_smem));
    // FP8: this thread's scales of block 0, then of each next block while the current one is expanded (weights: read before
    // the wait, as the weights' first stages are)
    constexpr int UN = FP8 ? LrUnits<RB, BOXES>::N : 1;
    float scNext[UN], scCur[UN];
    const int scCols = FP8 ? (k + f8.blockCols - 1) / f8.blockCols : 0;
    if constexpr (FP8) lr_scales<RB, BOXES>(scNext, a0, nOut, 0, f8, scCols);
    if (threadIdx.x == 0) {
        #pragma unroll
        for (int s = 0; s < STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bars + 8 * s) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        // the weights of the first stages before the wait: they do not depend on the previous kernel
        for (int b = 0; b < STAGES - 1 && b < blocks; b++) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar(b)), "r"(SB) : "memory");
            #pragma unroll
            for (int j = 0; j < BOXES; j++) loadW(slot(b) + j * W8, b * KS + 64 * j, bar(b));
        }
    }
    dependent_launch_entry();
    if (threadIdx.x == 0) {
        for (int b = 0; b < STAGES - 1 && b < blocks; b++) {
            #pragma unroll
            for (int j = 0; j < BOXES; j++) lr_tma(slot(b) + BOXES * W8 + j * XB, mapX, b * KS + 64 * j, 0, bar(b));
        }
    }
    __syncthreads(); // the barriers are initialised
    float d[XN / 2];
    #pragma unroll
    for (int i = 0; i < XN / 2; i++) d[i] = 0.f;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    #pragma unroll 1
    for (int b = 0; b < blocks; b++) {
        lr_wait(bar(b), (b / STAGES) & 1);
        if constexpr (FP8) {
            #pragma unroll
            for (int m = 0; m < UN; m++) scCur[m] = scNext[m];
            if (b + 1 < blocks) lr_scales<RB, BOXES>(scNext, a0, nOut, (b + 1) * KS, f8, scCols);
            // the expansion buffer of b's parity was last read by block b - 2's wgmmas, done (wait_group 1 of block b - 1)
            lr_expand<RB, BOXES>(generic + (slot(b) - base), generic + (wtile(b) - base), scCur);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); // the expanded boxes, seen by the wgmma
            __syncthreads();
        }
        #pragma unroll
        for (int j = 0; j < BOXES; j++) lr_wgmma4<XN>(d, lr_desc(wtile(b) + j * WB), lr_desc(slot(b) + BOXES * W8 + j * XB));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // block b - 1's wgmmas are done: its slot takes block b + STAGES - 1
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        const int nb = b + STAGES - 1;
        if (threadIdx.x == 0 && nb < blocks) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar(nb)), "r"(SB) : "memory");
            #pragma unroll
            for (int j = 0; j < BOXES; j++) {
                loadW(slot(nb) + j * W8, nb * KS + 64 * j, bar(nb));
                lr_tma(slot(nb) + BOXES * W8 + j * XB, mapX, nb * KS + 64 * j, 0, bar(nb));
            }
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // d: weight rows 16 warp + gr (+8) of the 64 (the CTA's RB first), x rows 8j + 2tq (+1)
    const int gr = lane >> 2, tq = lane & 3;
    if (PAIRED) {
        // every warp's wgmmas are done (wait_group above, warpgroup-wide) and no copy is in flight: the stages' memory
        // takes the CTA's 64 x XN outputs, rounded to bf16 as linear_rows writes them
        bf16 *stg = reinterpret_cast<bf16 *>(generic);
        __syncthreads();
        #pragma unroll
        for (int j = 0; j < NT; j++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                // (written only where row < n: unconditional stores here made ptxas serialize the wgmmas at 4 and 8 tiles)
                const int row = 8 * j + 2 * tq + (e & 1), wr = 16 * warp + gr + 8 * (e >> 1);
                if (row < n) stg[wr * XN + row] = __float2bfloat16_rn(d[4 * j + e]);
            }
        }
        __syncthreads();
        lr_paired_epilogue(pr, stg, XN, n, nOut, y);
        return;
    }
    if (16 * warp >= RB) return;
    #pragma unroll
    for (int j = 0; j < NT; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = 8 * j + 2 * tq + (e & 1), wr = 16 * warp + gr + 8 * (e >> 1), out = o0 + wr;
            if (row < n && wr < RB && out < nOut) y[(long) row * nOut + out] = __float2bfloat16_rn(d[4 * j + e]);
        }
    }
}
#endif

// The variants: rows (8 NT), boxes of 64 keys a stage, stages, and (suffix _r16, _r32) weight rows a CTA
// when fewer than 64; CudaKernels.LINEAR_ROWS lists the same table. Fewer rows a CTA put more SMs on a
// narrow weight (the 3B's 2,560 outputs are 40 CTAs of 64 rows, on 132 SMs) and spread a wide one more
// evenly (the 33B's 9,216 are 144). Built for sm_90a only (elsewhere the backend does not load them and
// the body traps).
// The 64-row variants of one row tile (up to 8 rows: decode steps of batch 1 to 8, where PairingChoice times them in
// the step) have paired twins (linear_rows_paired_...), declared after the table.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LR_BODY(nt, boxes, stages, rb) linear_rows_impl<nt, boxes, stages, rb, false, false>(mapX, n, k, mapW, nOut, y, LrPaired{}, LrFp8{});
#define LR_FP8_BODY(nt, boxes, stages, rb) \
    linear_rows_impl<nt, boxes, stages, rb, false, true>(mapX, n, k, mapW, nOut, y, LrPaired{}, LrFp8{scales, blockRows, blockCols});
#define LR_PAIRED_BODY(nt, boxes, stages) \
    linear_rows_impl<nt, boxes, stages, 64, true, false>(mapX, n, k, mapW, nOut, y, \
        LrPaired{mode, group, span, pair, cos, sin, positions, qHeads, kvHeads, headDim, pool, slotMap, blockSize}, LrFp8{});
#else
#define LR_BODY(nt, boxes, stages, rb) __trap();
#define LR_FP8_BODY(nt, boxes, stages, rb) __trap();
#define LR_PAIRED_BODY(nt, boxes, stages) __trap();
#endif
#define LINEAR_ROWS_RB(nt, boxes, stages, rb, suffix) \
    extern "C" __global__ void __launch_bounds__(128) linear_rows_n##nt##_b##boxes##_s##stages##suffix( \
            const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y) { \
        LR_BODY(nt, boxes, stages, rb) \
    } \
    extern "C" __global__ void __launch_bounds__(128) linear_rows_fp8_n##nt##_b##boxes##_s##stages##suffix( \
            const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y, const float *scales, int blockRows, int blockCols) { \
        LR_FP8_BODY(nt, boxes, stages, rb) \
    }
#define LINEAR_ROWS_PAIRED(nt, boxes, stages) \
    extern "C" __global__ void __launch_bounds__(128) linear_rows_paired_n##nt##_b##boxes##_s##stages( \
            const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y, int mode, int group, int span, int pair, \
            const float *cos, const float *sin, const int *positions, int qHeads, int kvHeads, int headDim, bf16 *pool, \
            const int *slotMap, int blockSize) { \
        LR_PAIRED_BODY(nt, boxes, stages) \
    }
#define LINEAR_ROWS(nt, boxes, stages) LINEAR_ROWS_RB(nt, boxes, stages, 64, )
LINEAR_ROWS(1, 1, 8)
LINEAR_ROWS(1, 2, 6)
LINEAR_ROWS(1, 2, 8)
LINEAR_ROWS(1, 4, 4)
LINEAR_ROWS(2, 1, 8)
LINEAR_ROWS(2, 2, 6)
LINEAR_ROWS(4, 1, 8)
LINEAR_ROWS(4, 2, 6)
LINEAR_ROWS(8, 1, 6)
LINEAR_ROWS(8, 2, 4)
LINEAR_ROWS_RB(1, 4, 8, 16, _r16)
LINEAR_ROWS_RB(1, 2, 8, 32, _r32)
LINEAR_ROWS_RB(2, 4, 6, 16, _r16)
LINEAR_ROWS_RB(4, 2, 8, 16, _r16)
LINEAR_ROWS_PAIRED(1, 1, 8)
LINEAR_ROWS_PAIRED(1, 2, 6)
LINEAR_ROWS_PAIRED(1, 2, 8)
LINEAR_ROWS_PAIRED(1, 4, 4)

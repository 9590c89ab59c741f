// linear_rows_fp8_mma_n{NT}_b{BOXES}_s{STAGES}(mapX, n, k, mapW, nOut, y, scales, blockRows, blockCols): y (n, nOut) =
// bf16(x (n, k) @ W^T) over an fp8 weight (E4M3 (nOut, k) and its scales, as linear_rows_fp8_...) for up to 8 NT rows of x
// (decode steps), sm_90a. The bits are those of linear_rows and cuBLASLt over the expanded matrix (dequant_fp8): each
// output is one fp32 accumulator fed k's 16-key chunks in order, from zero, by mma.sync.m16n8k16 (which gives cuBLASLt's
// bits as wgmma does: LinearRowsContractTest, and the backend checks each weight shape before it uses a variant).
//
// Why a second fp8 kernel: linear_rows_fp8_ expands each stage's codes into a bf16 tile in shared memory for the wgmma,
// a round trip through shared memory and a barrier a stage, which kept batch-1 decode far from the bandwidth of the fp8
// bytes. Here the codes go from the stage to registers and into the MMA's A fragment directly: no expanded tile, no
// barrier but the warp's. One warp a CTA takes 16 weight rows; lane 0 copies by TMA (weights in boxes of 16 rows x 64
// codes, 64-byte swizzle; x in boxes of 8 NT rows x 64 keys bf16, 128-byte swizzle, zeros past n), STAGES stages of BOXES
// boxes in flight, the weights of the first ones requested before the wait on the previous kernel.
//
// A fragment (m16n8k16, bf16): lane L (row group g = L / 4, t = L % 4) holds rows g and g + 8, keys 2t, 2t + 1 and
// 8 + 2t, 9 + 2t of the chunk: four 16-bit loads of two codes each from the swizzled box (16-byte unit j of row r at
// j ^ ((r / 2) % 4): the 8 rows of a load fall in 8 distinct bank groups), each pair converted and scaled as fp8x2_weight
// (the weight's values). B fragment: x's 8 rows of a tile by ldmatrix, as linear_rows_mma did.
//
// The scale of a weight row is constant over a stage (the variant takes a weight whose column blocks are a multiple of
// the stage's keys, or per-row scales); each lane loads its two rows' scales of the next stage while this one computes.
// Grid ceil(nOut / 16), block 32, dynamic shared memory STAGES * BOXES * (1024 + 1024 NT) + 1024 (alignment) + 8 STAGES.
#include "linear_rows.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// a weight row's scales (its block row of them; null past nOut)
__device__ __forceinline__ const float *lr8_scales(const LrFp8 &f8, int row, int nOut, int scCols) {
    return row < nOut ? f8.scales + (long) (row / f8.blockRows) * scCols : nullptr;
}

// two codes at byte offset o of the aligned dynamic shared memory gen (a plain load: ordered after the stage's wait,
// which clobbers memory, and free to be scheduled among the others)
__device__ __forceinline__ unsigned lr8_ld16(const unsigned char *gen, unsigned o) {
    return *reinterpret_cast<const unsigned short *>(gen + o);
}

template <int NT, int BOXES, int STAGES>
__device__ __forceinline__ void linear_rows_fp8_mma_impl(const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y,
                                                         const LrFp8 &f8) {
    constexpr int RB = 16, WB = RB * 64, XB = 8 * NT * 128, SB = BOXES * (WB + XB), KS = 64 * BOXES, CH = 4 * BOXES;
    const int o0 = blockIdx.x * RB, lane = threadIdx.x, blocks = k / KS;
    const unsigned base = ((unsigned) __cvta_generic_to_shared(lr_smem) + 1023) & ~1023u, bars = base + STAGES * SB;
    auto bar = [&](int b) { return bars + 8 * (b % STAGES); };
    auto slot = [&](int b) { return base + (b % STAGES) * SB; };
    const unsigned char *const gen = lr_smem + (base - (unsigned) __cvta_generic_to_shared(lr_smem));
    const int g = lane >> 2, t = lane & 3;
    // this lane's two rows' scales: column block col holds the next stage; a block spans per stages (blockCols a multiple
    // of KS, or per-row scales: one block)
    const int scCols = (k + f8.blockCols - 1) / f8.blockCols, per = f8.blockCols >= k ? blocks : f8.blockCols / KS;
    const float *const pLo = lr8_scales(f8, o0 + g, nOut, scCols), *const pHi = lr8_scales(f8, o0 + g + 8, nOut, scCols);
    int col = 0, left = per;
    float sLo = pLo ? __ldg(pLo) : 0.f, sHi = pHi ? __ldg(pHi) : 0.f;
    if (lane == 0) {
        #pragma unroll
        for (int s = 0; s < STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bars + 8 * s) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        // the weights of every first stage before the wait: they do not depend on the previous kernel
        for (int b = 0; b < STAGES && b < blocks; b++) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar(b)), "r"(SB) : "memory");
            #pragma unroll
            for (int j = 0; j < BOXES; j++) lr_tma(slot(b) + j * WB, mapW, b * KS + 64 * j, o0, bar(b));
        }
    }
    dependent_launch_entry();
    if (lane == 0) {
        for (int b = 0; b < STAGES && b < blocks; b++) {
            #pragma unroll
            for (int j = 0; j < BOXES; j++) lr_tma(slot(b) + BOXES * WB + j * XB, mapX, b * KS + 64 * j, 0, bar(b));
        }
    }
    __syncwarp(); // the barriers are initialised
    // this lane's bytes in a weight box: row g (row g + 8 is 512 bytes on, the same swizzle), codes 2t of each unit; the
    // unit j of row g at j ^ sw
    const unsigned wrow = g * 64 + 2 * t, sw = (g >> 1) & 3;
    // x: ldmatrix.x2 rows (lanes 0-15): row L % 8 of the tile, key half (L / 8) % 2
    const int xr = lane & 7, xh = (lane >> 3) & 1;
    float d[NT][4];
    #pragma unroll
    for (int i = 0; i < NT; i++) d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.f;
    #pragma unroll 1
    for (int b = 0; b < blocks; b++) {
        const float cLo = sLo, cHi = sHi;
        if (--left == 0 && b + 1 < blocks) {
            left = per;
            col++;
            sLo = pLo ? __ldg(pLo + col) : 0.f;
            sHi = pHi ? __ldg(pHi + col) : 0.f;
        }
        lr_wait(bar(b), (b / STAGES) & 1);
        const unsigned s = slot(b);
        unsigned a[CH][4], x[CH][NT][2];
        #pragma unroll
        for (int c = 0; c < CH; c++) {
            const unsigned w = s - base + (c / 4) * WB + wrow + (((c % 4) ^ sw) << 4);
            a[c][0] = fp8x2_weight(lr8_ld16(gen, w), cLo);
            a[c][1] = fp8x2_weight(lr8_ld16(gen, w + 512), cHi);
            a[c][2] = fp8x2_weight(lr8_ld16(gen, w + 8), cLo);
            a[c][3] = fp8x2_weight(lr8_ld16(gen, w + 520), cHi);
            const int h = 2 * (c % 4);
            #pragma unroll
            for (int i = 0; i < NT; i++) {
                const unsigned xb = s + BOXES * WB + (c / 4) * XB + (8 * i + xr) * 128 + (((h + xh) ^ xr) << 4);
                // (no memory clobber: the volatile wait and refill keep it in its stage, the code loads may interleave with it)
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(x[c][i][0]), "=r"(x[c][i][1]) : "r"(xb));
            }
        }
        // the chain: k's 16-key chunks in order into the same accumulators
        #pragma unroll
        for (int c = 0; c < CH; c++) {
            #pragma unroll
            for (int i = 0; i < NT; i++) {
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
                             : "r"(a[c][0]), "r"(a[c][1]), "r"(a[c][2]), "r"(a[c][3]), "r"(x[c][i][0]), "r"(x[c][i][1]));
            }
        }
        // the stage's reads are done (their values fed the MMAs above): its slot takes block b + STAGES
        const int nb = b + STAGES;
        if (nb < blocks) {
            __syncwarp();
            if (lane == 0) {
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); // the generic reads before the copies' writes
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar(nb)), "r"(SB) : "memory");
                #pragma unroll
                for (int j = 0; j < BOXES; j++) {
                    lr_tma(slot(nb) + j * WB, mapW, nb * KS + 64 * j, o0, bar(nb));
                    lr_tma(slot(nb) + BOXES * WB + j * XB, mapX, nb * KS + 64 * j, 0, bar(nb));
                }
            }
        }
    }
    // d[i]: weight rows g (e < 2) and g + 8, x rows 8 i + 2t + (e & 1)
    #pragma unroll
    for (int i = 0; i < NT; i++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = 8 * i + 2 * t + (e & 1), out = o0 + g + 8 * (e >> 1);
            if (row < n && out < nOut) y[(long) row * nOut + out] = __float2bfloat16_rn(d[i][e]);
        }
    }
}
#define LR8_MMA_BODY(nt, boxes, stages) \
    linear_rows_fp8_mma_impl<nt, boxes, stages>(mapX, n, k, mapW, nOut, y, LrFp8{scales, blockRows, blockCols});
#else
#define LR8_MMA_BODY(nt, boxes, stages) __trap();
#endif

// The variants (Fp8Kernels lists the same table: LinearRowsVariant.FP8_MMA): rows (8 NT), boxes of 64 keys a stage, stages.
#define LINEAR_ROWS_FP8_MMA(nt, boxes, stages) \
    extern "C" __global__ void __launch_bounds__(32) linear_rows_fp8_mma_n##nt##_b##boxes##_s##stages( \
            const void *mapX, int n, int k, const void *mapW, int nOut, bf16 *y, const float *scales, int blockRows, int blockCols) { \
        LR8_MMA_BODY(nt, boxes, stages) \
    }
LINEAR_ROWS_FP8_MMA(1, 1, 8)
LINEAR_ROWS_FP8_MMA(1, 2, 8)
LINEAR_ROWS_FP8_MMA(1, 2, 12)
LINEAR_ROWS_FP8_MMA(1, 4, 6)
LINEAR_ROWS_FP8_MMA(2, 2, 8)
LINEAR_ROWS_FP8_MMA(4, 1, 8)
LINEAR_ROWS_FP8_MMA(4, 2, 6)

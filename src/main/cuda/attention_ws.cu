// attention_ws: prefill attention on Hopper (sm_90a) with warp-specialised warpgroups, the same values as p0 and
// prefill_wgmma bit for bit (every row's arithmetic is attention_wgmma.cuh's wg_attention_rows, prefill_wgmma's). FlashAttention-3's
// structure kept to Spindle's fixed 64-key tiles and splits:
//   warpgroup 0, the producer, copies the CTA's K/V tiles into WS_STAGES stages (cp.async, prefill_wgmma's copies, a tile's
//   block-table reads made before its stage is free; registers handed to the consumers with setmaxnreg) and marks
//   each stage full on an mbarrier once its copies have landed and are fenced for the async proxy;
//   warpgroups 1 and 2, the consumers, hold 64 MMA rows each (128 a CTA: the host plans tiles of 128 / G rows),
//   read every stage both, and mark a stage empty on a second mbarrier once their wgmmas are done with it.
// So a K/V tile is copied once for 128 MMA rows (prefill_wgmma: once for 64), no consumer thread issues a copy or waits at
// a __syncthreads, and the copies of the next tiles run while the consumers compute. prefill_ws_pingpong adds FlashAttention-3's
// ping-pong: the consumers take turns to issue their wgmmas (named barriers 1 and 2), so one's softmax runs under
// the other's matrix products.
// Kernels attention_hd128_p0s, attention_hd128_p0sp, attention_hd128_p0sr and attention_hd128_p0sq (below): p0's arguments and descriptors (attention.cu; a CTA's rows
// up to 128 / G), grid (CTAs, kvHeads), block 384 threads, one CTA an SM. Dynamic shared memory: 1024 bytes for
// alignment, WS_STAGES stages of K and V (32 KiB each at head dim 128), the consumers' running O (fp32, 64 KiB; prefill_ws_registers, prefill_ws_registers_no_pingpong:
// their Q tiles, bf16, 32 KiB), then 2 WS_STAGES mbarriers. A wait for an mbarrier that lasts seconds traps (wgmma.cuh's mbar_wait): a broken pipeline
// fails the launch instead of hanging the GPU. Written without a GPU; first run, tested and measured on the H200 on
// 2026-12-05 (docs/KERNELS.md, docs/bench/ab-warp-specialized-prefill).
#include "attention_pairs.cuh"

#define WS_STAGES 4
// The producer marks tile i - WS_LAG full after issuing tile i's copies, which wait for tile i - S's stage to be empty:
// the consumers empty it at the end of their iteration i - S, which began by waiting for tile i - S + 1 to be full.
// So S >= WS_LAG + 2 (or nothing moves), and consumer iteration j, which needs tile j + 1 full, waits for the end of
// their own iteration j + 1 + WS_LAG - S and the producer's round trip after it: S - WS_LAG - 2 iterations of slack
// (one here; WS_LAG 2 of 4 stages left none, and every consumer iteration would wait on the producer).
#define WS_LAG 1
// registers a thread of the producer keeps, and of the consumers (128 P + 256 C <= 65,536)
#define WS_PRODUCER_REGS 40
#define WS_CONSUMER_REGS 232

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// the consumers' stages: tile i in stage i % S, full[s] set by the producer's 128 threads, empty[s] by the
// consumers' 256; PP: the two consumer warpgroups take turns to issue their wgmmas
template <int HD, int S, bool PP>
struct WsFeed {
    static constexpr unsigned STAGE = 2u * KT * HD * 2;
    const unsigned base, bars; // stage 0, and full[0] (full[s] at bars + 8 s, empty[s] at bars + 8 (S + s))
    const int w;               // this consumer warpgroup, 0 or 1
    __device__ __forceinline__ unsigned stage(int i) const { return base + ((unsigned) i % S) * STAGE; }
    __device__ __forceinline__ void waitFull(int i) const { mbar_wait(bars + 8 * ((unsigned) i % S), ((unsigned) i / S) & 1); }
    __device__ __forceinline__ void first() const {
        if (PP && w == 1) named_arrive<1>(256); // warpgroup 0 issues first
        waitFull(0);
    }
    __device__ __forceinline__ void before(int i, bool next) const {
        if (next) waitFull(i + 1);
    }
    // barrier 1: warpgroup 0's turn, 2: warpgroup 1's (immediate ids: ptxas then reserves three barriers, not sixteen)
    __device__ __forceinline__ void issue() const {
        if (PP) {
            if (w == 0) named_sync<1>(256);
            else named_sync<2>(256);
        }
    }
    // the other warpgroup's turn (warpgroup 1 gives none after its last issue: warpgroup 0 waits for no more)
    __device__ __forceinline__ void issued(int, bool next) const {
        if (PP) {
            if (w == 0) named_arrive<2>(256);
            else if (next) named_arrive<1>(256);
        }
    }
    __device__ __forceinline__ void read(int i) const { mbar_arrive(bars + 8 * (S + (unsigned) i % S)); }
    __device__ __forceinline__ void after(int) const {}
};

template <int HD, int S, bool PP, bool QS, int VLBO, int VSBO>
__device__ __forceinline__ void attention_ws_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        int heads, int kvHeads, int blockSize, float scale) {
    static_assert(S >= WS_LAG + 2 && (S & (S - 1)) == 0, "stages: a power of two, at least WS_LAG + 2");
    constexpr unsigned STAGE = 2u * KT * HD * 2;
    const WgCta cta(desc + blockIdx.x * 8);
    dependent_launch_entry();
    const unsigned raw = (unsigned) __cvta_generic_to_shared(attn_smem), base = (raw + 1023) & ~1023u;
    unsigned char *aligned = reinterpret_cast<unsigned char *>(attn_smem) + (base - raw);
    // after the stages: the consumers' running O (fp32), or (QS) their Q tiles (bf16)
    float *orun = reinterpret_cast<float *>(aligned + S * STAGE);
    const unsigned bars = base + S * STAGE + 2 * 64 * HD * (QS ? 2 : 4);
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(bars + 8 * s, 128);
            mbar_init(bars + 8 * (S + s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int tiles = cta.tiles();
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(WS_PRODUCER_REGS));
        const WgTileCopy<HD, 128> copy(pool, tables, cta, blockIdx.y, kvHeads, blockSize, threadIdx.x);
        // tile i: its table reads, then wait until the consumers have read the stage's previous tile (i - S), copy, and mark
        // tile i - WS_LAG full once this thread's copies of it have landed (fenced for the wgmmas' async proxy, released)
        #pragma unroll 1
        for (int i = 0; i < tiles; i++) {
            unsigned row[KT / WgTileCopy<HD, 128>::KSTEP];
            copy.rows(i, row);
            if (i >= S) mbar_wait(bars + 8 * (S + i % S), (i / S - 1) & 1);
            copy.copy(base + (i % S) * STAGE, i, row);
            asm volatile("cp.async.commit_group;\n" ::);
            if (i >= WS_LAG) {
                asm volatile("cp.async.wait_group %0;\n" :: "n"(WS_LAG));
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                mbar_arrive(bars + 8 * ((i - WS_LAG) % S));
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        #pragma unroll 1
        for (int i = max(0, tiles - WS_LAG); i < tiles; i++) mbar_arrive(bars + 8 * (i % S));
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(WS_CONSUMER_REGS));
        const unsigned t = threadIdx.x - 128;
        WsFeed<HD, S, PP> feed{base, bars, (int) (t >> 7)};
        wg_attention_rows<HD, VLBO, VSBO, 256, WsFeed<HD, S, PP>, QS>(qkv, qkvStride, out, cta, heads, kvHeads, scale, t, orun, feed,
                                                                     base + S * STAGE);
    }
}
#define WS_BODY(hd, pp, qs) attention_ws_impl<hd, WS_STAGES, pp, qs, 8192, 1024>(qkv, qkvStride, out, pool, tables, desc, heads, kvHeads, blockSize, scale);

// prefill_ws_pairs: the consumers walk pairs of tiles (attention_pairs.cuh); K and V in slots of their own, two pairs of each. The
// producer copies pair p's K once pair p - 2's scores are done, then its V once pair p - 2's P V is, each marked full by
// the copies' own completion (cp.async.mbarrier.arrive: the producer never waits for its copies); a CTA of an odd
// count of tiles walks one more, past its last key (zeros, masked: an exact no-op, as prefill_ws's warpgroups may)
template <int HD, int VLBO, int VSBO, bool WIDE>
__device__ __forceinline__ void attention_pairs_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        int heads, int kvHeads, int blockSize, float scale) {
    using SM = PairSmem<HD>;
    using Copy = WgTileCopy<HD, 128>;
    const WgCta cta(desc + blockIdx.x * 8);
    dependent_launch_entry();
    const unsigned raw = (unsigned) __cvta_generic_to_shared(attn_smem), base = (raw + 1023) & ~1023u;
    float *orun = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(attn_smem) + (base - raw) + SM::O);
    const unsigned bars = base + SM::BARS;
    if (threadIdx.x == 0) {
        for (int s = 0; s < 2; s++) {
            mbar_init(SM::kFull(bars, s), 128);
            mbar_init(SM::vFull(bars, s), 128);
            mbar_init(SM::kEmpty(bars, s), 256);
            mbar_init(SM::vEmpty(bars, s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(WS_PRODUCER_REGS));
        const Copy copy(pool, tables, cta, blockIdx.y, kvHeads, blockSize, threadIdx.x);
        const int pairs = (cta.tiles() + 1) / 2;
        #pragma unroll 1
        for (int p = 0; p < pairs; p++) {
            unsigned ra[KT / Copy::KSTEP], rb[KT / Copy::KSTEP];
            copy.rows(2 * p, ra);
            copy.rows(2 * p + 1, rb);
            const int s = p & 1;
            const unsigned k = base + SM::K + s * SM::PAIR, v = base + SM::V + s * SM::PAIR;
            if (p >= 2) mbar_wait(SM::kEmpty(bars, s), ((p >> 1) - 1) & 1);
            copy.template copy_part<false, SM::template kColumnBlock<WIDE>()>(k, 2 * p, ra);
            copy.template copy_part<false, SM::template kColumnBlock<WIDE>()>(k + SM::template kSecond<WIDE>(), 2 * p + 1, rb);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(SM::kFull(bars, s)) : "memory");
            if (p >= 2) mbar_wait(SM::vEmpty(bars, s), ((p >> 1) - 1) & 1);
            copy.template copy_part<true>(v, 2 * p, ra);
            copy.template copy_part<true>(v + SM::TILE, 2 * p + 1, rb);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(SM::vFull(bars, s)) : "memory");
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(WS_CONSUMER_REGS));
        wg_attention_pairs<HD, VLBO, VSBO, WIDE>(qkv, qkvStride, out, cta, heads, kvHeads, scale, threadIdx.x - 128, base, orun);
    }
}
#define WS_PAIRS_BODY(hd, wide) attention_pairs_impl<hd, 8192, 1024, wide>(qkv, qkvStride, out, pool, tables, desc, heads, kvHeads, blockSize, scale);
#else
#define WS_BODY(hd, pp, qs) __trap();
#define WS_PAIRS_BODY(hd, wide) __trap();
#endif

// p0's signature (partO and partML unused: prefill writes out)
#define ATTENTION_WS(hd, name, pp, qs) \
    extern "C" __global__ void __launch_bounds__(384, 1) attention_hd##hd##_##name( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        WS_BODY(hd, pp, qs) \
    }
// head dim 128 only (the family's), as prefill_wgmma
ATTENTION_WS(128, prefill_ws, false, false)
ATTENTION_WS(128, prefill_ws_pingpong, true, false)
// prefill_ws_registers: prefill_ws_pingpong with each consumer warpgroup's Q in shared memory (read by the scores' wgmmas) and its run's O in registers
// (wg_attention_rows's QS): the split fold without the shared-memory round trip. Written without a GPU (2026-12-05)
ATTENTION_WS(128, prefill_ws_registers, true, true)
// prefill_ws_registers_no_pingpong: prefill_ws_registers without the ping-pong (prefill_ws measured equal to or 1-3% faster than prefill_ws_pingpong; prefill_ws_registers_no_pingpong 1.2% faster than prefill_ws_registers on the
// H100 at 8K): the prefill on Hopper (PrefillKernelChoice.HOPPER_ORDER)
ATTENTION_WS(128, prefill_ws_registers_no_pingpong, false, true)
// prefill_ws_pairs: pairs of tiles a consumer iteration, K and V in slots of their own (attention_pairs.cuh): p0's bits
// (KernelContractTest, docs/bench/pairs-by-length); the prefill on Hopper from 4K keys where prefill_ws_pairs_wide does not load
// (PrefillKernelChoice.PAIRS_FROM_KEYS, PAIRS_ORDER)
#define ATTENTION_WS_PAIRS(hd, name, wide) \
    extern "C" __global__ void __launch_bounds__(384, 1) attention_hd##hd##_##name( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        WS_PAIRS_BODY(hd, wide) \
    }
ATTENTION_WS_PAIRS(128, prefill_ws_pairs, false)
// prefill_ws_pairs_wide: prefill_ws_pairs with a pair's scores as one m64n128k16 wgmma a 16-dim chunk over both tiles' keys (8 a pair instead of 16),
// each K slot one tile of 128 keys: prefill_ws_pairs's bits (KernelContractTest on an H100), 1.3-1.7% faster at 8K and 32K; the
// prefill on Hopper from 4K keys (docs/bench/wide-pair-scores)
ATTENTION_WS_PAIRS(128, prefill_ws_pairs_wide, true)

// attention_wgmma: prefill attention on Hopper's warpgroup MMA (sm_90a), the same values as attention.cu's
// p0 bit for bit: the same tiles (KT keys), splits (attention.cuh), canonical tile sums and fold, the same
// arithmetic on every score, only the matrix products issued as wgmma (one fp32 accumulator fed k's
// 16-wide chunks in order from zero, as mma.sync does; docs/KERNELS.md, "Attention numerics").
//
// Kernel attention_hd128_p0g: p0's arguments, grid and descriptors (attention.cu); block 128 threads,
// one warpgroup whose warp w holds MMA rows 16 w.. (the rows p0's warp w holds), walking its tiles as
// attention_wgmma.cuh's wg_attention_rows does and copying them itself: two stages, tile i + 2 copied while
// tiles i and i + 1 are read, a __syncthreads between a stage's reads and its next copies.
// Dynamic shared memory: two stages of K and V, the CTA's running O (fp32), 1024 bytes for alignment.
#include "attention_wgmma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// prefill_wgmma's stages: its own copies, two deep (tile i in stage i & 1)
template <int HD, int THREADS>
struct WgSelfFeed {
    static constexpr unsigned STAGE = 2u * KT * HD * 2;
    const WgTileCopy<HD, THREADS> &copy;
    const unsigned base;
    const int tiles;
    __device__ __forceinline__ unsigned stage(int i) const { return base + (i & 1) * STAGE; }
    __device__ __forceinline__ void load(int i) const {
        copy(stage(i), i);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    // this thread's copies are visible to the async proxy (wgmma reads through it), then everyone's
    __device__ __forceinline__ static void landed() {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
    }
    __device__ __forceinline__ void first() const {
        load(0);
        if (tiles > 1) {
            load(1);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        landed();
    }
    __device__ __forceinline__ void before(int, bool next) const {
        if (next) {
            asm volatile("cp.async.wait_group 0;\n" ::);
            landed();
        }
    }
    __device__ __forceinline__ void issue() const {}
    __device__ __forceinline__ void issued(int, bool) const {}
    __device__ __forceinline__ void read(int) const {}
    __device__ __forceinline__ void after(int i) const {
        __syncthreads(); // stage i & 1 is free for tile i + 2
        if (i + 2 < tiles) load(i + 2);
    }
};

template <int HD, int WGS, int VLBO, int VSBO>
__device__ __forceinline__ void attention_wgmma_impl(
        const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc,
        int heads, int kvHeads, int blockSize, float scale) {
    constexpr int THREADS = 128 * WGS;
    constexpr unsigned STAGE = 2u * KT * HD * 2;
    const WgCta cta(desc + blockIdx.x * 8);
    dependent_launch_entry();
    const WgTileCopy<HD, THREADS> copy(pool, tables, cta, blockIdx.y, kvHeads, blockSize, threadIdx.x);
    const unsigned raw = (unsigned) __cvta_generic_to_shared(attn_smem), base = (raw + 1023) & ~1023u;
    float *orun = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(attn_smem) + (base - raw) + 2 * STAGE);
    WgSelfFeed<HD, THREADS> feed{copy, base, cta.tiles()};
    wg_attention_rows<HD, VLBO, VSBO, THREADS>(qkv, qkvStride, out, cta, heads, kvHeads, scale, threadIdx.x, orun, feed);
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
    extern "C" __global__ void __launch_bounds__(128 * WG_GROUPS) attention_hd##hd##_prefill_wgmma( \
            const bf16 *qkv, int qkvStride, bf16 *out, const bf16 *pool, const int *tables, const int *desc, float *partO, \
            float *partML, int heads, int kvHeads, int blockSize, float scale) { \
        WG_BODY(hd) \
    }
// head dim 128 only (the family's): the kernel is written for any multiple of 64, but 64 has not run on a GPU yet
ATTENTION_WGMMA(128)

// wgmma.cuh: Hopper's warpgroup MMA (sm_90a) as the prefill attention kernels issue it (attention_wgmma.cu,
// attention_ws.cu): shared-memory descriptors of the 128-byte swizzled K/V tiles, the score and P V products,
// fences and the pins that keep the compiler's moves out of the wgmma pipeline; and the mbarrier and named-barrier
// steps of attention_ws.cu's producer and consumers.
#pragma once
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

// scores with Q from shared memory (a descriptor of the warpgroup's 64 x 16 chunk, K-major and swizzled as K's): the first
// chunk d = a * B, then d += a * B
__device__ __forceinline__ void wg_scores_ss0(float *d, unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_L32
                 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WG_W8(0), WG_W8(8), WG_W8(16), WG_W8(24) : "l"(a), "l"(b));
}
__device__ __forceinline__ void wg_scores_ss(float *d, unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_L32
                 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WG_R8(0), WG_R8(8), WG_R8(16), WG_R8(24) : "l"(a), "l"(b));
}

// a pair of tiles' scores in one product (attention_pairs.cuh's prefill_ws_pairs_wide): dA (keys 0..63) and dB (keys 64..127) as one 64 x 128
// accumulator (its columns 8 c + .. are dA's for c < 8, dB's after) = a * B, B 128 keys of a K-major tile pair; the first chunk
// from zero, then += (each score the same fp32 accumulator fed the same chunks in order as two m64n64k16 products give it)
#define WG_W8X(x, i) "=f"(x[i]), "=f"(x[i + 1]), "=f"(x[i + 2]), "=f"(x[i + 3]), "=f"(x[i + 4]), "=f"(x[i + 5]), "=f"(x[i + 6]), "=f"(x[i + 7])
#define WG_R8X(x, i) "+f"(x[i]), "+f"(x[i + 1]), "+f"(x[i + 2]), "+f"(x[i + 3]), "+f"(x[i + 4]), "+f"(x[i + 5]), "+f"(x[i + 6]), "+f"(x[i + 7])
__device__ __forceinline__ void wg_scores_pair0(float *dA, float *dB, const unsigned *a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_L64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : WG_W8X(dA, 0), WG_W8X(dA, 8), WG_W8X(dA, 16), WG_W8X(dA, 24), WG_W8X(dB, 0), WG_W8X(dB, 8), WG_W8X(dB, 16), WG_W8X(dB, 24)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wg_scores_pair(float *dA, float *dB, const unsigned *a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_L64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : WG_R8X(dA, 0), WG_R8X(dA, 8), WG_R8X(dA, 16), WG_R8X(dA, 24), WG_R8X(dB, 0), WG_R8X(dB, 8), WG_R8X(dB, 16), WG_R8X(dB, 24)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
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

// 16 bytes to shared memory at a shared-window address
__device__ __forceinline__ void st_shared_u4(unsigned addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" :: "r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// mbarrier steps (shared::cta; arrive releases, the wait acquires): a producer's stage filled, a consumer's stage read
__device__ __forceinline__ void mbar_init(unsigned bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// until the phase of parity `parity` of bar has completed. A phase waited for 2^26 tries (seconds, each try may suspend
// the thread a while; a tile's copies take microseconds) never will: the launch fails (trap) instead of hanging the GPU
__device__ __forceinline__ void mbar_wait(unsigned bar, int parity) {
    asm volatile("{\n .reg .pred p;\n .reg .u32 n;\n mov.u32 n, 0;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @p bra DONE_%=;\n add.u32 n, n, 1;\n setp.eq.u32 p, n, 67108864;\n @p trap;\n bra WAIT_%=;\n DONE_%=:\n}\n"
                 :: "r"(bar), "r"(parity) : "memory");
}
// named barrier ID (1 and up; 0 is __syncthreads'): wait for `threads` arrivals, or arrive without waiting
template <int ID>
__device__ __forceinline__ void named_sync(int threads) { asm volatile("bar.sync %0, %1;\n" :: "n"(ID), "r"(threads) : "memory"); }
template <int ID>
__device__ __forceinline__ void named_arrive(int threads) { asm volatile("bar.arrive %0, %1;\n" :: "n"(ID), "r"(threads) : "memory"); }
#endif

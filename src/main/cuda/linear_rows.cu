// linear_rows: y (n, nOut) = bf16(x (n, k) @ W^T) for few rows (n <= 64: decode steps, short windows),
// W (nOut, k) and x row-major bf16, fp32 accumulation on tensor cores (mma.sync m16n8k16).
//
// The bits are cuBLASLt's. Every split-free algorithm cuBLASLt offers for these shapes (wgmma or
// mma.sync, any tile) gives one output the same bits (CublasLt groups them by their bits: one group
// per shape on the H200), which is what a single fp32 accumulator fed one 16-wide chunk of k after
// another, from zero and in order, gives. This kernel does exactly that, so it may stand in for the
// pinned cuBLASLt algorithms wherever they would run; the backend checks the equality on each
// weight shape before it uses the kernel (backend/cuda/Linear), and a contract test checks it too.
//
// What it does differently is the memory side: decode is a weight stream, and here the weights of a
// CTA's output rows flow through STAGES shared-memory stages of KB keys with cp.async, the first
// stages requested before the kernel waits on the previous one (programmatic dependent launch: the
// weights do not depend on it), so the stream starts during the previous kernel's tail.
//
// Kernel linear_rows_n{NT}_w{WARPS}_k{KB}_s{STAGES}: grid ceil(nOut / (16 WARPS)) CTAs, block 32 WARPS
// threads (each warp 16 output rows), rows padded to NT tiles of 8, k % 16 == 0, dynamic
// shared memory STAGES * (16 WARPS + 8 NT) * (KB + 8) * 2 bytes.
#include "common.cuh"

__device__ __forceinline__ void lr_mma(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void lr_copy16(bf16 *dst, const bf16 *src, bool in) {
    unsigned d = (unsigned) __cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(d), "l"(src), "r"(in ? 16 : 0));
}

extern __shared__ __align__(16) bf16 lr_smem[];

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// sm_90a: wgmma, whose chain of MMAs into one accumulator stays inside the tensor core (an mma.sync
// chain waits for each result in registers before the next: about 190 cycles a step on the H200)

// One stage's eight 16-wide chunks of k as eight wgmmas into the same accumulators, issued back to back
// in one asm statement (nothing may touch the accumulators between them); the descriptors step by
// the chunk stride, (64 + N) x 16 bf16 in 16-byte units.
template <int N>
__device__ __forceinline__ void lr_wgmma8(float *d, unsigned long long da, unsigned long long db);

template <>
__device__ __forceinline__ void lr_wgmma8<8>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\n.reg .b64 a, b;\nsetp.ne.b32 p, 1, 0;\nmov.b64 a, %4;\nmov.b64 b, %5;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %6;\nadd.s64 b, b, %6;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, a, b, p, 1, 1, 0, 0;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db), "n"(128 + 2 * 8) : "memory");
}

template <>
__device__ __forceinline__ void lr_wgmma8<16>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\n.reg .b64 a, b;\nsetp.ne.b32 p, 1, 0;\nmov.b64 a, %8;\nmov.b64 b, %9;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %10;\nadd.s64 b, b, %10;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, a, b, p, 1, 1, 0, 0;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(da), "l"(db), "n"(128 + 2 * 16) : "memory");
}

template <>
__device__ __forceinline__ void lr_wgmma8<32>(float *d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\n.reg .b64 a, b;\nsetp.ne.b32 p, 1, 0;\nmov.b64 a, %16;\nmov.b64 b, %17;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "add.s64 a, a, %18;\nadd.s64 b, b, %18;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, a, b, p, 1, 1, 0, 0;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "n"(128 + 2 * 32) : "memory");
}

#endif

template <int NT, int WARPS, int LR_KB, int LR_STAGES>
__device__ __forceinline__ void linear_rows_impl(const bf16 *x, int n, int k, const bf16 *w, int nOut, bf16 *y) {
    constexpr int LR_LDS = LR_KB + 8, WR = 16 * WARPS, XR = 8 * NT, STAGE = (WR + XR) * LR_LDS;
    const int o0 = blockIdx.x * WR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int blocks = (k + LR_KB - 1) / LR_KB, chunks16 = k / 16;
    float acc[NT][4];
    #pragma unroll
    for (int t = 0; t < NT; t++) for (int e = 0; e < 4; e++) acc[t][e] = 0.f;
    // the MMAs of one stage: this warp's 16 weight rows times the x rows, k's 16-wide chunks in order
    auto mmaStage = [&](int b) {
        const bf16 *Ws = lr_smem + (b % LR_STAGES) * STAGE, *Xs = Ws + WR * LR_LDS;
        #pragma unroll
        for (int c = 0; c < LR_KB / 16; c++) {
            if (b * (LR_KB / 16) + c >= chunks16) break;
            unsigned a[4];
            unsigned sa = (unsigned) __cvta_generic_to_shared(Ws + (16 * warp + (lane & 15)) * LR_LDS + 16 * c + (lane >> 4) * 8);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(sa));
            if constexpr (NT == 1) {
                unsigned b0, b1;
                unsigned sb = (unsigned) __cvta_generic_to_shared(Xs + (lane & 7) * LR_LDS + 16 * c + ((lane >> 3) & 1) * 8);
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(sb));
                lr_mma(acc[0], a, b0, b1);
            } else {
                #pragma unroll
                for (int t = 0; t < NT; t += 2) {
                    unsigned bb[4];
                    unsigned sb = (unsigned) __cvta_generic_to_shared(
                            Xs + (8 * t + (lane & 7) + ((lane >> 4) << 3)) * LR_LDS + 16 * c + ((lane >> 3) & 1) * 8);
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(bb[0]), "=r"(bb[1]), "=r"(bb[2]), "=r"(bb[3]) : "r"(sb));
                    lr_mma(acc[t], a, bb[0], bb[1]);
                    lr_mma(acc[t + 1], a, bb[2], bb[3]);
                }
            }
        }
    };
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WARPS == 4 && NT <= 4 && LR_KB == 128) {
    // One warpgroup, 64 weight rows, k % 128 == 0. A stage holds, per 16-wide chunk of k, the 64 x 16 weight
    // tile then the 8 NT x 16 x tile, each in core-matrix order (8 rows x 16 bytes a core matrix; along k
    // 128 bytes on, along the rows 256), filled by cp.async of 16 bytes (zero past nOut and n): the lanes
    // of a warp take 8 rows x 64 contiguous bytes. The wgmmas of stage b run while stage b + 1 is awaited
    // and later stages load; a slot is refilled once the wgmmas that read it are done.
    constexpr int XN = 8 * NT, WT = 64 * 16, XT = XN * 16, CT = WT + XT, WSTAGE = (LR_KB / 16) * CT;
    auto place = [&](int r, int q) { return (q >> 1) * CT + (r >> 3) * 128 + (q & 1) * 64 + (r & 7) * 8; };
    auto load = [&](int b) {
        bf16 *Ws = lr_smem + (b % LR_STAGES) * WSTAGE;
        #pragma unroll
        for (int i = 0; i < 8; i++) {
            int c = threadIdx.x + 128 * i, q = (c & 3) + 4 * (c >> 8), r = (c >> 2) & 63, kk = b * LR_KB + q * 8;
            bool in = o0 + r < nOut;
            lr_copy16(Ws + place(r, q), in ? w + (long) (o0 + r) * k + kk : w, in);
        }
    };
    auto loadX = [&](int b) {
        bf16 *Xs = lr_smem + (b % LR_STAGES) * WSTAGE + WT;
        #pragma unroll
        for (int i = 0; i < (XN * 16 + 127) / 128; i++) {
            int c = threadIdx.x + 128 * i, q = (c & 3) + 4 * (c / (4 * XN)), r = (c >> 2) % XN, kk = b * LR_KB + q * 8;
            if (c >= XN * 16) break;
            bool in = r < n;
            lr_copy16(Xs + place(r, q), in ? x + (long) r * k + kk : x, in);
        }
    };
    auto desc = [&](const bf16 *p) {
        unsigned long long a = (unsigned) __cvta_generic_to_shared(p);
        return ((a & 0x3FFFF) >> 4) | ((unsigned long long) (128 >> 4) << 16) | ((unsigned long long) (256 >> 4) << 32);
    };
    float d[XN / 2];
    #pragma unroll
    for (int i = 0; i < XN / 2; i++) d[i] = 0.f;
    for (int b = 0; b < LR_STAGES - 1; b++) if (b < blocks) load(b);
    dependent_launch_entry();
    for (int b = 0; b < LR_STAGES - 1; b++) {
        if (b < blocks) loadX(b);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int b = 0; b < blocks; b++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(LR_STAGES - 2));
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); // every thread's copies of stage b are in
        const bf16 *Ws = lr_smem + (b % LR_STAGES) * WSTAGE;
        lr_wgmma8<XN>(d, desc(Ws), desc(Ws + WT));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // the wgmmas of block b - 1 are done: its slot takes block b + STAGES - 1
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (b + LR_STAGES - 1 < blocks) {
            load(b + LR_STAGES - 1);
            loadX(b + LR_STAGES - 1);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n" ::);
    // d: rows 16 warp + gr (+8) of the 64, x rows 8j + 2tq (+1)
    const int gr = lane >> 2, tq = lane & 3;
    #pragma unroll
    for (int j = 0; j < NT; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = 8 * j + 2 * tq + (e & 1), out = o0 + 16 * warp + gr + 8 * (e >> 1);
            if (row < n && out < nOut) y[(long) row * nOut + out] = __float2bfloat16_rn(d[4 * j + e]);
        }
    }
    return;
    }
#endif
#if 1
    // before sm_90: cp.async of 16 bytes a thread, zero-filled past nOut, n and k
    constexpr int CH = LR_KB / 8;
    auto loadW = [&](int b) {
        bf16 *Ws = lr_smem + (b % LR_STAGES) * STAGE;
        for (int c = threadIdx.x; c < WR * CH; c += 32 * WARPS) {
            int r = c / CH, kk = b * LR_KB + (c % CH) * 8;
            bool in = o0 + r < nOut && kk < k;
            lr_copy16(Ws + r * LR_LDS + (c % CH) * 8, in ? w + (long) (o0 + r) * k + kk : w, in);
        }
    };
    auto loadX = [&](int b) {
        bf16 *Xs = lr_smem + (b % LR_STAGES) * STAGE + WR * LR_LDS;
        for (int c = threadIdx.x; c < XR * CH; c += 32 * WARPS) {
            int r = c / CH, kk = b * LR_KB + (c % CH) * 8;
            bool in = r < n && kk < k;
            lr_copy16(Xs + r * LR_LDS + (c % CH) * 8, in ? x + (long) r * k + kk : x, in);
        }
    };
    for (int b = 0; b < LR_STAGES - 1; b++) if (b < blocks) loadW(b);
    dependent_launch_entry();
    for (int b = 0; b < LR_STAGES - 1; b++) {
        if (b < blocks) loadX(b);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int b = 0; b < blocks; b++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(LR_STAGES - 2));
        __syncthreads(); // stage b is in; stage b - 1 is free for block b + STAGES - 1
        if (b + LR_STAGES - 1 < blocks) {
            loadW(b + LR_STAGES - 1);
            loadX(b + LR_STAGES - 1);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        mmaStage(b);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
    // acc[t]: W rows o0 + 16 warp + gr (+8), x rows 8t + 2tq (+1)
    const int gr = lane >> 2, tq = lane & 3;
    #pragma unroll
    for (int t = 0; t < NT; t++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = 8 * t + 2 * tq + (e & 1), out = o0 + 16 * warp + gr + 8 * (e >> 1);
            if (row < n && out < nOut) y[(long) row * nOut + out] = __float2bfloat16_rn(acc[t][e]);
        }
    }
}

// The variants: rows (8 NT), warps (16 weight rows each), keys per stage, stages. They compute the same
// values (the same chain per output) and differ in how the weights stream; the backend times them per
// weight shape and row count (backend/cuda/Linear). CudaKernels.LINEAR_ROWS lists the same table.
#define LINEAR_ROWS(nt, warps, kb, stages) \
    extern "C" __global__ void __launch_bounds__(32 * warps) linear_rows_n##nt##_w##warps##_k##kb##_s##stages( \
            const bf16 *x, int n, int k, const bf16 *w, int nOut, bf16 *y) { \
        linear_rows_impl<nt, warps, kb, stages>(x, n, k, w, nOut, y); \
    }
LINEAR_ROWS(1, 4, 128, 4)
LINEAR_ROWS(1, 4, 128, 6)
LINEAR_ROWS(1, 4, 128, 8)
LINEAR_ROWS(2, 4, 128, 4)
LINEAR_ROWS(2, 4, 128, 6)
LINEAR_ROWS(4, 4, 128, 4)
LINEAR_ROWS(4, 4, 128, 6)
LINEAR_ROWS(8, 4, 128, 4)

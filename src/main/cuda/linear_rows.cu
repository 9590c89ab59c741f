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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// sm_90+: each stage's rows arrive by bulk copies (one instruction a row segment, completion counted
// in bytes on the stage's mbarrier), so streaming costs the SM almost no instructions
__device__ __forceinline__ void lr_bulk(bf16 *dst, const bf16 *src, int bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"((unsigned) __cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void lr_wait(unsigned bar, int parity) {
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n"
                 :: "r"(bar), "r"(parity) : "memory");
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Rows past nOut and x rows past n are not copied: their stale values only reach outputs that are
    // not written. Warp 0 arms a stage's mbarrier with its bytes and its lanes issue the row copies.
    __shared__ __align__(8) unsigned long long bars[LR_STAGES];
    const int validW = min(WR, nOut - o0);
    auto bar = [&](int b) { return (unsigned) __cvta_generic_to_shared(&bars[b % LR_STAGES]); };
    auto segBytes = [&](int b) { return min(LR_KB, k - b * LR_KB) * 2; };
    auto arm = [&](int b) {
        if (lane == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar(b)), "r"((validW + n) * segBytes(b)) : "memory");
        }
        __syncwarp();
    };
    auto copyW = [&](int b) {
        bf16 *Ws = lr_smem + (b % LR_STAGES) * STAGE;
        for (int r = lane; r < validW; r += 32) lr_bulk(Ws + r * LR_LDS, w + (long) (o0 + r) * k + b * LR_KB, segBytes(b), bar(b));
    };
    auto copyX = [&](int b) {
        bf16 *Xs = lr_smem + (b % LR_STAGES) * STAGE + WR * LR_LDS;
        for (int r = lane; r < n; r += 32) lr_bulk(Xs + r * LR_LDS, x + (long) r * k + b * LR_KB, segBytes(b), bar(b));
    };
    if (threadIdx.x == 0) {
        #pragma unroll
        for (int s = 0; s < LR_STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"((unsigned) __cvta_generic_to_shared(&bars[s])));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // the weights' first stages before the wait: they do not depend on the previous kernel
    if (warp == 0) {
        for (int b = 0; b < LR_STAGES - 1 && b < blocks; b++) {
            arm(b);
            copyW(b);
        }
    }
    dependent_launch_entry();
    if (warp == 0) {
        for (int b = 0; b < LR_STAGES - 1 && b < blocks; b++) copyX(b);
    }
    for (int b = 0; b < blocks; b++) {
        // block b + STAGES - 1 into the slot block b - 1 left (every warp was done with it at the barrier below)
        if (warp == 0 && b + LR_STAGES - 1 < blocks) {
            arm(b + LR_STAGES - 1);
            copyW(b + LR_STAGES - 1);
            copyX(b + LR_STAGES - 1);
        }
        lr_wait(bar(b), (b / LR_STAGES) & 1);
        mmaStage(b);
        __syncthreads();
    }
#else
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
LINEAR_ROWS(1, 4, 256, 4)
LINEAR_ROWS(1, 2, 256, 4)
LINEAR_ROWS(1, 1, 512, 4)
LINEAR_ROWS(1, 4, 128, 8)
LINEAR_ROWS(2, 4, 128, 6)
LINEAR_ROWS(2, 2, 256, 4)
LINEAR_ROWS(2, 4, 256, 3)
LINEAR_ROWS(4, 4, 128, 6)
LINEAR_ROWS(4, 2, 128, 6)
LINEAR_ROWS(4, 4, 256, 3)
LINEAR_ROWS(8, 4, 128, 4)
LINEAR_ROWS(8, 4, 64, 8)
LINEAR_ROWS(8, 8, 128, 4)

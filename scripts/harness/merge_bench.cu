// A standalone timing harness for the decode merge (no Java): one decode row of SPLITS split states for
// HEADS query heads of head dim 128, as the 33B at 128K context gives them, merged by the kernels of
// src/main/cuda/attention.cu and by experimental variants of this file, each timed alone (L2 flushed
// before every run unless said), the outputs compared bit for bit with attention_merge's.
// Build here (no GPU needed), run on the device:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src/main/cuda -o merge_bench scripts/harness/merge_bench.cu
//   ./merge_bench [splits]            (default 1032: 128K keys of 128-key splits)
// What each variant asks (docs/bench/ab-merge-slices/summary.txt has the question):
//   load_only        the loads of a CTA per 32-dim slice alone (no fold): is the access pattern the bound?
//   load_only_w8     the same loads issued by eight warps a slice
//   wide             attention_merge_wide as built (since session 31; it replaced attention_merge_long, a CTA per
//                    32-dim slice with 16 stages, whose loads and fold the variants below keep)
//   wide (L2 hot)    the same right after a run: the partials in L2 (27 MB of a 50 MB L2)
//   loaders_w4/_w8   four / eight warps a slice issue the loads, warp 0 folds (branch merge-loader-warps)
//   contig           a CTA per slice over partials laid out [head][slot][dim]: each slice's stream contiguous
// merge_variant folds with attention.cu's merge_chunk (the kernels' own fold); only the loads vary.
#include "attention.cu"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int HEADS = 56, HD = 128, SLICES = HD / 32, CH = 32, ST = 16;

// where split s of head qh keeps o (dim 0) and (m, l): the pass's layout [slot][head][dim], or [head][slot][dim]
struct SlotMajor { int heads, hd; __device__ long o(int s, int qh) const { return ((long) s * heads + qh) * hd; } __device__ long ml(int s, int qh) const { return ((long) s * heads + qh) * 2; } };
struct HeadMajor { int slots, hd; __device__ long o(int s, int qh) const { return ((long) qh * slots + s) * hd; } __device__ long ml(int s, int qh) const { return ((long) qh * slots + s) * 2; } };

// W warps a CTA (one slice): all issue the loads, warp 0 folds (FOLD = false: loads only, a checksum written)
template <int W, bool FOLD, class Layout>
__global__ void __launch_bounds__(32 * W) merge_variant(const float *partO, const float *partML, int n, Layout at, bf16 *out) {
    extern __shared__ __align__(16) float sm[];
    float *buf = sm;
    float2 *ml = reinterpret_cast<float2 *>(buf + ST * CH * 32);
    float4 *f = reinterpret_cast<float4 *>(ml + ST * CH);
    const int qh = blockIdx.y / SLICES, dim0 = (blockIdx.y % SLICES) * 32, t = threadIdx.x, lane = t & 31;
    const int chunks = (n + CH - 1) / CH;
    auto load = [&](int c) {
        if (c < chunks) {
            const int c0 = c * CH, cnt = min(CH, n - c0);
            float *stage = buf + (c % ST) * CH * 32;
            for (int e = t; e < cnt * 8; e += 32 * W) {
                const int sp = e / 8, part = e % 8;
                const unsigned dst = (unsigned) __cvta_generic_to_shared(stage + sp * 32 + 4 * part);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(partO + at.o(c0 + sp, qh) + dim0 + 4 * part));
            }
            if (t < cnt) {
                const unsigned dst = (unsigned) __cvta_generic_to_shared(&ml[(c % ST) * CH + t]);
                asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(dst), "l"(partML + at.ml(c0 + t, qh)));
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    for (int c = 0; c < ST - 1; c++) load(c);
    float M = -INFINITY, L = 0.f, O = 0.f;
    for (int c = 0; c < chunks; c++) {
        if (W > 1) __syncthreads();
        load(c + ST - 1);
        asm volatile("cp.async.wait_group %0;\n" :: "n"(ST - 1));
        if (W > 1) __syncthreads(); else __syncwarp();
        if (t >= 32) continue;
        const int cnt = min(CH, n - c * CH);
        const float *b = buf + (c % ST) * CH * 32 + lane;
        if (!FOLD) {
            for (int s = 0; s < cnt; s++) O += b[s * 32];
            __syncwarp();
            continue;
        }
        merge_chunk<CH>(ml + (c % ST) * CH, buf + (c % ST) * CH * 32, cnt, f, M, L, O);
    }
    if (t < 32) out[qh * HD + dim0 + lane] = __float2bfloat16_rn(FOLD ? __fdiv_rn(O, L) : O);
}

static float *flushBuf;
static int flushes = 0;
// 256 MB written between runs: the last run's lines leave the 50 MB L2
static void flushL2() { CK(cudaMemset(flushBuf, (flushes++) & 0xff, 256u << 20)); }

template <class F>
static float timeIt(F run, bool flush, int reps = 21) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < reps; i++) {
        if (flush) flushL2(); else run();
        CK(cudaEventRecord(a));
        run();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t * 1000.f);
    }
    std::sort(ms.begin(), ms.end());
    return ms[reps / 2];
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 1032;
    const long oN = (long) n * HEADS * HD, mlN = (long) n * HEADS * 2;
    std::vector<float> o(oN), m(mlN), oh(oN), mh(mlN);
    unsigned seed = 12345;
    auto rnd = [&]() { seed = seed * 1664525u + 1013904223u; return (seed >> 8) / 16777216.f; };
    for (long i = 0; i < oN; i++) o[i] = 2 * rnd() - 1;
    for (long i = 0; i < mlN; i += 2) { m[i] = 4 + 6 * rnd(); m[i + 1] = 1 + 99 * rnd(); }
    for (int s = 0; s < n; s++)
        for (int h = 0; h < HEADS; h++) {
            memcpy(&oh[((long) h * n + s) * HD], &o[((long) s * HEADS + h) * HD], HD * 4);
            memcpy(&mh[((long) h * n + s) * 2], &m[((long) s * HEADS + h) * 2], 8);
        }
    float *dO, *dML, *dOh, *dMLh;
    bf16 *ref, *got;
    int *cdesc;
    CK(cudaMalloc(&dO, oN * 4)); CK(cudaMalloc(&dML, mlN * 4)); CK(cudaMalloc(&dOh, oN * 4)); CK(cudaMalloc(&dMLh, mlN * 4));
    CK(cudaMalloc(&ref, HEADS * HD * 2)); CK(cudaMalloc(&got, HEADS * HD * 2)); CK(cudaMalloc(&cdesc, 12));
    CK(cudaMalloc(&flushBuf, 256u << 20));
    CK(cudaMemcpy(dO, o.data(), oN * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dML, m.data(), mlN * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dOh, oh.data(), oN * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dMLh, mh.data(), mlN * 4, cudaMemcpyHostToDevice));
    int cd[3] = {0, n, 0};
    CK(cudaMemcpy(cdesc, cd, 12, cudaMemcpyHostToDevice));
    // the variants' stages: ST of CH splits of a 32-dim slice and their (m, l), then the factor table
    const int shortBytes = SLICES * (4 * 16 * (32 * 4 + 8) + 512), variantBytes = ST * CH * (32 * 4 + 8) + 512;
    CK(cudaFuncSetAttribute(attention_merge_wide, cudaFuncAttributeMaxDynamicSharedMemorySize, MERGE_WIDE_BYTES));
    auto mergeShort = [&](bf16 *y) { attention_merge<<<dim3(1, HEADS), 32 * SLICES, shortBytes>>>(dO, dML, cdesc, y, HEADS, HD); };
    auto mergeWide = [&]() { attention_merge_wide<<<dim3(1, HEADS * ((HD + 127) / 128)), 32, MERGE_WIDE_BYTES>>>(dO, dML, cdesc, got, HEADS, HD); };
    mergeShort(ref);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned short> want(HEADS * HD), have(HEADS * HD);
    CK(cudaMemcpy(want.data(), ref, HEADS * HD * 2, cudaMemcpyDeviceToHost));
    auto check = [&](const char *name) {
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(have.data(), got, HEADS * HD * 2, cudaMemcpyDeviceToHost));
        int diff = 0;
        for (int i = 0; i < HEADS * HD; i++) diff += want[i] != have[i];
        return diff;
    };
    const double mb = (oN + mlN) * 4 / 1e6;
    auto report = [&](const char *name, float us, int diff) {
        printf("%-16s %8.2f us  %7.0f GB/s  %s\n", name, us, mb * 1e3 / us, diff < 0 ? "(loads only)" : diff == 0 ? "same bits" : "DIFFERENT BITS");
        if (diff > 0) printf("                 %d of %d outputs differ\n", diff, HEADS * HD);
    };
    printf("%d splits, %d heads, head dim %d: %.1f MB of split states\n", n, HEADS, HD, mb);
    // each timed first, then checked: as arguments of one call the two may be evaluated in either order (an earlier
    // version checked each line's output before running it, so its first line compared uninitialised memory)
    auto timed = [&](const char *name, auto run, bool flush) {
        float us = timeIt(run, flush);
        report(name, us, check(name));
    };
    timed("short (128 thr)", [&] { mergeShort(got); }, true);
    timed("wide", mergeWide, true);
    timed("wide (L2 hot)", mergeWide, false);
    SlotMajor sl{HEADS, HD};
    HeadMajor hm{n, HD};
    auto variant = [&](const char *name, auto kernel, int warps, bool fold, auto layout, const float *po, const float *pml) {
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, variantBytes));
        auto run = [&] { kernel<<<dim3(1, HEADS * SLICES), 32 * warps, variantBytes>>>(po, pml, n, layout, got); };
        float us = timeIt(run, true);
        report(name, us, fold ? check(name) : -1);
    };
    variant("load_only", merge_variant<1, false, SlotMajor>, 1, false, sl, dO, dML);
    variant("load_only_w8", merge_variant<8, false, SlotMajor>, 8, false, sl, dO, dML);
    variant("loaders_w4", merge_variant<4, true, SlotMajor>, 4, true, sl, dO, dML);
    variant("loaders_w8", merge_variant<8, true, SlotMajor>, 8, true, sl, dO, dML);
    variant("contig", merge_variant<1, true, HeadMajor>, 1, true, hm, dOh, dMLh);
    variant("contig_w8", merge_variant<8, true, HeadMajor>, 8, true, hm, dOh, dMLh);
    CK(cudaDeviceSynchronize());
    return 0;
}

// What the few-row GEMM kernels share (linear_rows.cu, linear_rows_fp8_mma.cu): the dynamic shared memory, an fp8
// weight's scales, and on sm_90a the TMA copy of one tensor-map box onto a stage's mbarrier and the wait on it.
#pragma once
#include "common.cuh"
#include "fp8.cuh"
#include <cuda_fp16.h>

// An fp8 weight's scales (fp8 variants; null scales: a bf16 weight): (ceil(nOut / blockRows), ceil(k / blockCols)) fp32.
struct LrFp8 {
    const float *scales;
    int blockRows, blockCols;
};

extern __shared__ __align__(16) unsigned char lr_smem[];

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// one box of the tensor map at (col, row) into shared memory at dst, counted in bytes on the mbarrier bar
__device__ __forceinline__ void lr_tma(unsigned dst, const void *map, int col, int row, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(map), "r"(col), "r"(row), "r"(bar) : "memory");
}

// until the mbarrier bar completes its phase of the given parity
__device__ __forceinline__ void lr_wait(unsigned bar, int parity) {
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n"
                 :: "r"(bar), "r"(parity) : "memory");
}
#endif

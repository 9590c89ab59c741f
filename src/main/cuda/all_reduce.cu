// all_reduce_sum: the tensor-parallel all-reduce of row-parallel GEMM partials (TensorParallelLayout):
// out[i] = bf16(((p0[i] + p1[i]) + p2[i]) + ...), each rank's fp32 partial added in rank order and the
// sum rounded once. Every rank runs it on its own copy of the partials' addresses (other GPUs' memory
// reached by peer access), so every rank gets the same bits, and a row's bits never depend on the
// batch. Grid-stride over n elements. Exact (one rounding), twin: CpuDecoderStep's allReduceStep/End.
#include "common.cuh"

extern "C" __global__ void all_reduce_sum(bf16 *out, int ranks, long n, const float *p0, const float *p1, const float *p2,
                                          const float *p3, const float *p4, const float *p5, const float *p6, const float *p7) {
    dependent_launch_entry();
    const float *p[8] = {p0, p1, p2, p3, p4, p5, p6, p7};
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        float s = p0[i];
        for (int r = 1; r < ranks; r++) {
            s = __fadd_rn(s, p[r][i]);
        }
        out[i] = __float2bfloat16_rn(s);
    }
}

// residual_add: dst = bf16(x + y) (in place where dst is x). Grid-stride over n elements. Exact.
#include "common.cuh"

extern "C" __global__ void residual_add(bf16 *dst, const bf16 *x, const bf16 *y, long n) {
    dependent_launch_entry();
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        st(dst, i, __fadd_rn(ld(x, i), ld(y, i)));
    }
}

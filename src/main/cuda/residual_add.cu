// residual_add: x = bf16(x + y). Grid-stride over n elements. Exact.
#include "common.cuh"

extern "C" __global__ void residual_add(bf16 *x, const bf16 *y, long n) {
    dependent_launch_entry();
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        st(x, i, __fadd_rn(ld(x, i), ld(y, i)));
    }
}

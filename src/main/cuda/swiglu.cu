// swiglu: gate = bf16(bf16(silu(gate)) * up), silu = g / (1 + exp(-g)) in fp32.
// Grid-stride over n elements. expf may differ from the CPU twin's correctly rounded exp by
// an fp32 ulp: within 1 bf16 ulp per element.
#include "common.cuh"

extern "C" __global__ void swiglu(bf16 *gate, const bf16 *up, long n) {
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        float g = ld(gate, i);
        float act = rnd(__fdiv_rn(g, __fadd_rn(1.f, expf(-g))));
        st(gate, i, __fmul_rn(act, ld(up, i)));
    }
}

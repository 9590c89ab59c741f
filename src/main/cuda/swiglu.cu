// swiglu: out = bf16(bf16(silu(gate)) * up), silu = g / (1 + exp(-g)) in fp32, from the fused
// gate|up rows (rows, 2 * width) into (rows, width). Grid-stride over rows * width.
// expf may differ from the CPU twin's correctly rounded exp by an fp32 ulp: within 1 bf16 ulp.
#include "common.cuh"

extern "C" __global__ void swiglu(const bf16 *gateUp, bf16 *out, long rows, int width) {
    long n = rows * width;
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        long r = i / width, c = i % width;
        float g = ld(gateUp, r * 2 * width + c);
        float act = rnd(__fdiv_rn(g, __fadd_rn(1.f, expf(-g))));
        st(out, i, __fmul_rn(act, ld(gateUp, r * 2 * width + width + c)));
    }
}

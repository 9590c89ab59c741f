// fill_dummy: seeded random bf16 weights generated on the device (--load-format dummy on the GPU:
// no host copy of a 66 GB model), center + scale * u with u uniform in [-1, 1) from a counter hash.
// Grid-stride over n elements. Not the same bytes as the CPU's DummyWeights (a benchmark input only).
#include "common.cuh"

extern "C" __global__ void fill_dummy(bf16 *p, long n, unsigned long long seed, float center, float scale) {
    dependent_launch_entry();
    for (long i = blockIdx.x * (long) blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        unsigned long long z = seed + (unsigned long long) i * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u = (float) (z >> 40) * 0x1.0p-24f * 2.f - 1.f;
        st(p, i, __fadd_rn(center, __fmul_rn(scale, u)));
    }
}

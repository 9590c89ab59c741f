// l2_prefetch: asks the L2 cache to fetch bytes [p, p + bytes) from device memory and returns at
// once; it reads nothing into registers and writes nothing, so it changes no value anywhere (a cache
// hint: no CPU twin). A captured decode step launches it beside the step (CudaDriver.fork) for the
// next weight matrix while the small kernels before that matrix's GEMM leave device memory idle.
// Grid-stride over chunks of PREFETCH_CHUNK bytes, one chunk per thread at a time: on sm_90+ one bulk
// prefetch per chunk (spread over every SM's copy engine), before sm_90 one prefetch per 128-byte line.
// p is 16-byte aligned; a tail of fewer than 16 bytes is left out.
#include "common.cuh"

#define PREFETCH_CHUNK 8192

extern "C" __global__ void l2_prefetch(const char *p, long bytes) {
    dependent_launch_entry();
    const long stride = (long) gridDim.x * blockDim.x;
    for (long c = blockIdx.x * (long) blockDim.x + threadIdx.x; c * PREFETCH_CHUNK < bytes; c += stride) {
        const long off = c * PREFETCH_CHUNK;
        const unsigned n = (unsigned) min((long) PREFETCH_CHUNK, bytes - off) & ~15u;
        if (n == 0) continue;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(p + off), "r"(n) : "memory");
#else
        for (unsigned i = 0; i < n; i += 128) {
            asm volatile("prefetch.global.L2 [%0];\n" :: "l"(p + off + i));
        }
#endif
    }
}

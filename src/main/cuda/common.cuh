// Shared helpers: bf16 storage, fp32 math, one rounding (nearest even) where HF rounds.
#pragma once
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float ld(const bf16 *p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float rnd(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ void st(bf16 *p, long i, float x) { p[i] = __float2bfloat16_rn(x); }

// The first statement of every kernel, or the first after its reads of memory that no kernel of the step
// writes (the step's plan, copied from the host before the step: descriptors, positions, slots; weights
// and rope tables), which then overlap the kernel before it. Decode steps launch kernels with
// programmatic dependent launch (sm_90+): a kernel may then be scheduled while the one before it still
// runs, and must wait here until that one has finished and its writes are visible; it then lets the next
// kernel be scheduled early (only now: letting it in before the wait put two kernels ahead of a running
// GEMM, measured slower on the 33B shape). Launched the ordinary way (or before sm_90) both are no-ops.
// The "memory" clobber keeps the early reads before the wait and every other access after it.
__device__ __forceinline__ void dependent_launch_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

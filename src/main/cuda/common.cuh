// Shared helpers: bf16 storage, fp32 math, one rounding (nearest even) where HF rounds.
#pragma once
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float ld(const bf16 *p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float rnd(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ void st(bf16 *p, long i, float x) { p[i] = __float2bfloat16_rn(x); }

// The first statement of every kernel. Decode steps launch kernels with programmatic dependent
// launch (sm_90+): a kernel may then be scheduled while the one before it still runs, and must wait
// here until that one has finished and its writes are visible; it then lets the next kernel be
// scheduled early. Launched the ordinary way (or before sm_90) both are no-ops.
__device__ __forceinline__ void dependent_launch_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The same in two halves, for kernels that first read what no kernel of the step writes (the step's
// plan: descriptors, positions, slots, copied from the host before the step; weights and rope tables)
// and so take that memory round trip while the kernel before them still runs:
//   dependent_launch_early();  ... loads of step-constant memory only ...  dependent_launch_wait();
// The "memory" clobber keeps those loads before the wait and every other access after it.
__device__ __forceinline__ void dependent_launch_early() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void dependent_launch_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

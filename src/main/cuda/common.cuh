// Shared helpers: bf16 storage, fp32 math, one rounding (nearest even) where HF rounds.
#pragma once
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float ld(const bf16 *p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float rnd(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ void st(bf16 *p, long i, float x) { p[i] = __float2bfloat16_rn(x); }

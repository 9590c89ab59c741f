// SwiGLU's arithmetic, shared by swiglu and linear_rows' paired epilogue: bf16(silu(g)) * u in fp32 (the caller
// rounds the product to bf16), silu = g / (1 + exp(-g)).
#pragma once
#include "common.cuh"

__device__ __forceinline__ float swiglu1(float g, float u) {
    float act = rnd(__fdiv_rn(g, __fadd_rn(1.f, expf(-g))));
    return __fmul_rn(act, u);
}

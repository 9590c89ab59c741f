// fp8 E4M3 weights: the codec both the quantizer and the dequantizing readers use, the same numbers as the
// CPU's model.Fp8 (decode exact in fp32; encode nearest, ties to even, saturating at 448, NaN to 0x7F) and
// model.Fp8Quantizer. A weight's value as every linear layer reads it is bf16(decode(q) * scale): fp32 product, one
// rounding to bf16 (backend.cpu.Fp8MatMul), so a linear layer over it computes what the bf16 GEMM computes over those
// bf16 values.
#pragma once
#include "common.cuh"
#include <cuda_fp16.h>

// the E4M3 code b as fp32 (exact): sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (m * 2^-9);
// 0x7F and 0xFF are NaN (as the hardware converter and model.Fp8 read them)
__device__ __forceinline__ float fp8_decode(unsigned b) {
    const unsigned s = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    if (e == 15u && m == 7u) return __int_as_float(s | 0x7FC00000u);
    if (e == 0) return __int_as_float(__float_as_int((float) m * 0x1p-9f) | s);
    return __int_as_float(s | ((e + 120u) << 23) | (m << 20));
}

// the nearest E4M3 code of f, ties to even, |f| >= 448 saturating to 448, NaN to 0x7F (model.Fp8.encode)
__device__ __forceinline__ unsigned fp8_encode(float f) {
    if (isnan(f)) return 0x7Fu;
    const unsigned bits = __float_as_uint(f), sign = (bits >> 24) & 0x80u;
    const float a = fabsf(f);
    unsigned code;
    if (a >= 448.f) {
        code = 0x7Eu;
    } else if (a < 0x1p-6f) {
        code = (unsigned) __float2int_rn(__fmul_rn(a, 512.f)); // subnormal steps of 2^-9 (the product is exact)
    } else {
        const unsigned ab = bits & 0x7FFFFFFFu, r = (ab + 0x7FFFFu + ((ab >> 20) & 1u)) & ~0xFFFFFu;
        const int e = (int) (r >> 23) - 127 + 7;
        code = min(0x7Eu, ((unsigned) e << 3) | ((r >> 20) & 7u));
    }
    return sign | code;
}

// a weight's value as the linear layers read it
__device__ __forceinline__ bf16 fp8_weight(unsigned b, float scale) {
    return __float2bfloat16_rn(__fmul_rn(fp8_decode(b), scale));
}

// two E4M3 codes (the low byte first) as fp32 (exact): the hardware converter to f16 on sm_89 and later, fp8_decode elsewhere
__device__ __forceinline__ float2 fp8x2_float2(unsigned two) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"((unsigned short) two));
    return __half22float2(*reinterpret_cast<const __half2 *>(&h2));
#else
    return make_float2(fp8_decode(two & 0xFFu), fp8_decode((two >> 8) & 0xFFu));
#endif
}

__device__ __forceinline__ unsigned bf16x2_bits(float lo, float hi) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned *>(&b);
}

// two E4M3 codes as a bf16 pair, exact (every E4M3 value is a bf16 value)
__device__ __forceinline__ unsigned fp8x2_bf16x2(unsigned two) {
    const float2 f = fp8x2_float2(two);
    return bf16x2_bits(f.x, f.y);
}

// two E4M3 codes of a weight as the bf16 pair its linear layers read: bf16(decode(q) * s), fp32 product, one rounding
// (fp8_weight's values)
__device__ __forceinline__ unsigned fp8x2_weight(unsigned two, float s) {
    const float2 f = fp8x2_float2(two);
    return bf16x2_bits(__fmul_rn(f.x, s), __fmul_rn(f.y, s));
}

// An fp8 KV record's scale (backend.KvCodec): the head vector's largest magnitude over 448, rounded up in magnitude to a
// bf16 value (so it never clips), 1 for a vector of zeros
__device__ __forceinline__ float kv8_scale(float amax) {
    if (amax == 0.f) return 1.f;
    unsigned b = __float_as_uint(__fdiv_rn(amax, 448.f));
    if (b & 0xFFFFu) b = (b & 0xFFFF0000u) + 0x10000u;
    return __uint_as_float(b);
}

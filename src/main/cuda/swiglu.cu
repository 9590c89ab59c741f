// swiglu: out = bf16(bf16(silu(gate)) * up), silu = g / (1 + exp(-g)) in fp32, from the fused
// gate|up rows (rows, 2 * width) into (rows, width). Grid: (column chunks, min(rows, 65535)) striding
// over rows, block 256; a thread takes 8 columns with 16-byte loads when width % 8 == 0, else one.
// expf may differ from the CPU twin's correctly rounded exp by an fp32 ulp: within 1 bf16 ulp.
#include "swiglu.cuh"

extern "C" __global__ void swiglu(const bf16 *gateUp, bf16 *out, int rows, int width) {
    dependent_launch_entry();
    const int vec = width % 8 == 0 ? 8 : 1, c = (blockIdx.x * blockDim.x + threadIdx.x) * vec;
    if (c >= width) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const bf16 *g = gateUp + (long) r * 2 * width + c, *u = g + width;
        bf16 *o = out + (long) r * width + c;
        if (vec == 8) {
            uint4 gv = *reinterpret_cast<const uint4 *>(g), uv = *reinterpret_cast<const uint4 *>(u), ov;
            const __nv_bfloat162 *g2 = reinterpret_cast<const __nv_bfloat162 *>(&gv), *u2 = reinterpret_cast<const __nv_bfloat162 *>(&uv);
            __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&ov);
            #pragma unroll
            for (int k = 0; k < 4; k++) {
                float2 a = __bfloat1622float2(g2[k]), b = __bfloat1622float2(u2[k]);
                o2[k] = __floats2bfloat162_rn(swiglu1(a.x, b.x), swiglu1(a.y, b.y));
            }
            *reinterpret_cast<uint4 *>(o) = ov;
        } else {
            st(o, 0, swiglu1(ld(g, 0), ld(u, 0)));
        }
    }
}

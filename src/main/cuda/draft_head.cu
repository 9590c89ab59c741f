// A DFlash / DFlash2 draft head's own kernels (the rest of its forward is the target's kernels: embed,
// rms_norm, rope, swiglu, residual_add, the linear layer).
//
// draft_attention: the block's queries (rows, heads, d) against the head's context keys/values
// (ctxRows, kvHeads, d; positions ctxStart..) and the block's own (rows, kvHeads, d; positions
// position..), bidirectional, within `window` positions when window > 0; GQA by head / (heads / kvHeads).
// fp32 scores, an online softmax (flash-style running max and sum), fp32 accumulation, the output rounded
// to bf16 once: sdpa's math, not bit-equal to the CPU twin's two-pass sum (the head's parity gate is KL
// to the fp32 reference). Grid: (rows, heads), block 128 = 4 warps taking keys in turn; a lane holds
// d / 32 dims (d <= 256). The warps' partial states are merged in shared memory in warp order.
#include "common.cuh"

#define DA_WARPS 4

extern "C" __global__ void draft_attention(const bf16 *q, const bf16 *ctxK, const bf16 *ctxV, const bf16 *blkK, const bf16 *blkV, bf16 *out,
                                           int rows, int ctxRows, int ctxStart, int position, int heads, int kvHeads, int d, int window) {
    dependent_launch_entry();
    const int r = blockIdx.x, h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows || h >= heads) return;
    const int kv = h / (heads / kvHeads), per = d / 32, kvw = kvHeads * d;
    const float scale = rsqrtf((float) d);
    float qv[8], acc[8];
    for (int i = 0; i < per; i++) {
        qv[i] = ld(q, ((long) r * heads + h) * d + lane * per + i);
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const int qpos = position + r, keys = ctxRows + rows;
    for (int j = warp; j < keys; j += DA_WARPS) {
        const bool fromCtx = j < ctxRows;
        const int kpos = fromCtx ? ctxStart + j : position + (j - ctxRows);
        if (window > 0 && abs(qpos - kpos) >= window) continue;
        const bf16 *kr = fromCtx ? ctxK + (long) j * kvw + kv * d : blkK + (long) (j - ctxRows) * kvw + kv * d;
        const bf16 *vr = fromCtx ? ctxV + (long) j * kvw + kv * d : blkV + (long) (j - ctxRows) * kvw + kv * d;
        float s = 0.f;
        for (int i = 0; i < per; i++) s = fmaf(qv[i], ld(kr, lane * per + i), s);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        s *= scale;
        const float mNew = fmaxf(m, s), corr = expf(m - mNew), p = expf(s - mNew);
        l = l * corr + p;
        for (int i = 0; i < per; i++) acc[i] = fmaf(p, ld(vr, lane * per + i), acc[i] * corr);
        m = mNew;
    }
    __shared__ float sm[DA_WARPS], sl[DA_WARPS], sacc[DA_WARPS][256];
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    for (int i = 0; i < per; i++) sacc[warp][lane * per + i] = acc[i];
    __syncthreads();
    if (warp != 0) return;
    float M = -INFINITY;
    for (int w = 0; w < DA_WARPS; w++) M = fmaxf(M, sm[w]);
    float L = 0.f;
    float o[8];
    for (int i = 0; i < per; i++) o[i] = 0.f;
    for (int w = 0; w < DA_WARPS; w++) {
        if (sm[w] == -INFINITY) continue;
        const float c = expf(sm[w] - M);
        L += sl[w] * c;
        for (int i = 0; i < per; i++) o[i] += sacc[w][lane * per + i] * c;
    }
    for (int i = 0; i < per; i++) st(out, ((long) r * heads + h) * d + lane * per + i, o[i] / L);
}

// dyn_conv: DFlash2's grouped dynamic depthwise convolution over the block's rows (causal, zero before the
// first row): out[t][c] = sum over taps o of bf16(out + bf16(base[o][c] * x[t-o][c])), then
// bf16(out + dyn[t][o][g] * x[t-o][c]) (the reference's order and roundings); dyn (rows, dynStride) holds
// [taps][groups] at column offset dynOffset. Grid: (rows, ceil(hidden / 256)), block 256.
extern "C" __global__ void dyn_conv(const bf16 *x, const bf16 *dyn, int dynStride, int dynOffset, const bf16 *base, bf16 *out,
                                    int rows, int hidden, int groupSize, int taps) {
    dependent_launch_entry();
    const int t = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (t >= rows || c >= hidden) return;
    const int groups = hidden / groupSize, g = c / groupSize;
    float acc = 0.f;
    for (int o = 0; o < taps; o++) {
        const float v = t - o < 0 ? 0.f : ld(x, (long) (t - o) * hidden + c);
        acc = rnd(acc + rnd(ld(base, (long) o * hidden + c) * v));
        acc = rnd(fmaf(ld(dyn, (long) t * dynStride + dynOffset + o * groups + g), v, acc));
    }
    st(out, (long) t * hidden + c, acc);
}

// shape_logits: logits = bf16(logits * multiplier), then (softcap > 0) bf16(bf16(tanh(bf16(z / cap))) * cap).
extern "C" __global__ void shape_logits(bf16 *z, long n, float multiplier, float softcap) {
    dependent_launch_entry();
    for (long i = (long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long) gridDim.x * blockDim.x) {
        float v = ld(z, i);
        if (multiplier != 1.f) v = rnd(v * multiplier);
        if (softcap > 0.f) v = rnd(rnd(tanhf(rnd(v / softcap))) * softcap);
        st(z, i, v);
    }
}

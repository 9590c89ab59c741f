// argmax: greedy sampling on the GPU, out[r] = the index of row r's largest logit, the first among
// equals (as torch.argmax). Grid: (rows), block: 1024. Exact: each thread keeps the first of its largest
// values in index order, and the tree prefers the lower index among equals.
#include "common.cuh"

extern "C" __global__ void argmax(const bf16 *logits, int rows, int vocab, int *out) {
    dependent_launch_entry();
    __shared__ float bv[1024];
    __shared__ int bi[1024];
    int r = blockIdx.x;
    if (r >= rows) return;
    const bf16 *p = logits + (long) r * vocab;
    float best = -INFINITY;
    int idx = 0x7fffffff;
    if (vocab % 8 == 0) {
        // 16 bytes a load, four loads in flight: the thread's chunks in increasing order, the first of equals kept
        for (int c0 = threadIdx.x; c0 * 8 < vocab; c0 += 4 * blockDim.x) {
            uint4 v[4];
            #pragma unroll
            for (int u = 0; u < 4; u++) {
                int c = c0 + u * blockDim.x;
                if (c * 8 < vocab) v[u] = *reinterpret_cast<const uint4 *>(p + 8 * c);
            }
            #pragma unroll
            for (int u = 0; u < 4; u++) {
                int c = c0 + u * blockDim.x;
                if (c * 8 >= vocab) break;
                const bf16 *e = reinterpret_cast<const bf16 *>(&v[u]);
                #pragma unroll
                for (int j = 0; j < 8; j++) {
                    float x = __bfloat162float(e[j]);
                    if (x > best) { best = x; idx = 8 * c + j; }
                }
            }
        }
    } else {
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            float v = ld(p, i);
            if (v > best) { best = v; idx = i; }
        }
    }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = idx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float v = bv[threadIdx.x + s];
            int j = bi[threadIdx.x + s];
            if (v > bv[threadIdx.x] || (v == bv[threadIdx.x] && j < bi[threadIdx.x])) { bv[threadIdx.x] = v; bi[threadIdx.x] = j; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = bi[0];
}

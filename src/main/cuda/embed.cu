// embed: out[r, :] = table[tokens[r], :]. Grid: (rows), block: 256. Exact.
#include "common.cuh"

extern "C" __global__ void embed(const int *tokens, const bf16 *table, bf16 *out, int rows, int hidden) {
    dependent_launch_entry();
    int r = blockIdx.x;
    if (r >= rows) return;
    long src = (long) tokens[r] * hidden, dst = (long) r * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[dst + i] = table[src + i];
}

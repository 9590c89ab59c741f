// feed_tokens: a step started before the previous step's tokens reached the host takes them on the device. For each of n
// pairs (at meta[pairs + 2t]): meta[to] = drawn[from], where `to` is a token slot of the step's integers (meta, just
// uploaded) and `from` a logit row of the previous step, whose draw (argmax or sample) wrote its id at drawn[from].
// Grid: ceil(n / 128), block: 128. Exact.
#include "common.cuh"

extern "C" __global__ void feed_tokens(int *meta, int pairs, int n, const int *drawn) {
    dependent_launch_entry(); // the previous step's draws are complete
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    meta[meta[pairs + 2 * t]] = drawn[meta[pairs + 2 * t + 1]];
}

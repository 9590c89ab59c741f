// feed_tokens: a step started before the previous step's tokens reached the host takes them on the device. For each of n
// pairs (at meta[pairs + 2t]): meta[to] = drawn[from], where `to` is a token slot of the step's integers (meta, just
// uploaded) and `from` a logit row of the previous step, whose draw wrote its id at drawn[from]. An id outside
// [0, vocab) (a draw cannot give one) is written as 0, so that the embedding never reads outside its table: the host
// refuses that id when it reads the previous step's ids, and the sequence's step fails there. Grid: ceil(n / 128),
// block: 128. Exact.
#include "common.cuh"

extern "C" __global__ void feed_tokens(int *meta, int pairs, int n, const int *drawn, int vocab) {
    dependent_launch_entry(); // the previous step's draws are complete
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int id = drawn[meta[pairs + 2 * t + 1]];
    meta[meta[pairs + 2 * t]] = id >= 0 && id < vocab ? id : 0;
}

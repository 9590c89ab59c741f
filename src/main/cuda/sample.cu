// sample: draws each row's next token from its bf16 logits on the device, by the engine's rule
// (sample.Sampler, without penalties, bias or grammar): the vocabulary in order of logit,
// highest first, ties by lower id; top-k keeps the first k; w = exp((l - max) / T); min-p keeps
// w >= minP (w of the first is 1); top-p keeps the shortest prefix whose mass reaches topP of the
// top-k mass; the token is the first in order whose cumulative mass exceeds u times the kept mass.
// T == 0: the argmax (first among equals). T < 0: the row is skipped.
//
// With top-k <= 1024 (the common case) the k tokens are gathered and sorted, and the rule runs on them
// as the host runs it (sample_small_top_k). Otherwise every kept set is a prefix of the order, held as a cutoff (v, j): the 16-bit order keys of the
// bf16 values above v, and those equal to v with id <= j. Cutoffs are found by binary search over the
// 65,536 keys (counts and masses of the tokens at or above a key) and, within the tie group, in id
// order. Reductions have a fixed order, so a row's token depends on its logits, parameters and u alone.
// params per row (doubles): T, topK (0 = off), topP (1 = off), minP (0 = off), u in [0, 1).
// w is kept in scratch (rows, vocab) fp32. Grid: rows, block: 1024.
#include "common.cuh"

#define SAMPLE_THREADS 1024

__device__ __forceinline__ int order_key(unsigned short b) {
    return (b & 0x8000) ? (~b & 0xFFFF) : (b | 0x8000);
}

// the bf16 value of an order key
__device__ __forceinline__ float key_value(int k) {
    unsigned short b = k & 0x8000 ? (unsigned short) (k & 0x7FFF) : (unsigned short) (~k & 0xFFFF);
    return __bfloat162float(__ushort_as_bfloat16(b));
}

__device__ __forceinline__ bool in_prefix(int key, int id, int v, int j) {
    return key > v || (key == v && id <= j);
}

template <typename T, typename Op>
__device__ T block_reduce(T x, T *sh, Op op) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_down_sync(0xffffffffu, x, o));
    if (lane == 0) sh[warp] = x;
    __syncthreads();
    if (warp == 0) {
        x = sh[lane];
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_down_sync(0xffffffffu, x, o));
        if (lane == 0) sh[32] = x;
    }
    __syncthreads();
    T r = sh[32];
    __syncthreads();
    return r;
}

// The sum of v over the threads before this one (thread order), block-wide; every thread must call.
__device__ int exclusive_scan(int v) {
    __shared__ int scan[SAMPLE_THREADS];
    scan[threadIdx.x] = v;
    __syncthreads();
    for (int o = 1; o < SAMPLE_THREADS; o <<= 1) {
        int add = threadIdx.x >= o ? scan[threadIdx.x - o] : 0;
        __syncthreads();
        scan[threadIdx.x] += add;
        __syncthreads();
    }
    int before = scan[threadIdx.x] - v;
    __syncthreads();
    return before;
}

struct SampleRow {
    const unsigned short *bits;
    const float *w;
    int n;
    double *shd;
    int *shi;

    __device__ int key(int i) const { return order_key(bits[i]); }

    // tokens of the prefix (v, j) with key >= c
    __device__ int count_at_least(int c, int v, int j) const {
        int cnt = 0;
        for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) {
            int k = key(i);
            cnt += (k >= c && in_prefix(k, i, v, j)) ? 1 : 0;
        }
        return block_reduce(cnt, shi, [](int a, int b) { return a + b; });
    }

    // mass of the prefix (v, j) with key >= c
    __device__ double mass_at_least(int c, int v, int j) const {
        double m = 0;
        for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) {
            int k = key(i);
            if (k >= c && in_prefix(k, i, v, j)) m += w[i];
        }
        return block_reduce(m, shd, [](double a, double b) { return a + b; });
    }

    // the id of the m-th (1-based) token with key t inside the prefix (v, j), in id order
    __device__ int tie_id(int t, int m, int v, int j) const {
        const int chunk = (n + SAMPLE_THREADS - 1) / SAMPLE_THREADS, lo = threadIdx.x * chunk, hi = min(n, lo + chunk);
        int cnt = 0;
        for (int i = lo; i < hi; i++) cnt += (key(i) == t && in_prefix(t, i, v, j)) ? 1 : 0;
        // the counts before this thread's ids, then the thread holding the m-th finds it
        int before = exclusive_scan(cnt);
        if (threadIdx.x == 0) shi[33] = -1;
        __syncthreads();
        if (m > before && m <= before + cnt) {
            int seen = before;
            for (int i = lo; i < hi; i++) {
                if (key(i) == t && in_prefix(t, i, v, j) && ++seen == m) {
                    shi[33] = i;
                    break;
                }
            }
        }
        __syncthreads();
        int r = shi[33];
        __syncthreads();
        return r;
    }

    // the largest key c with pred(c) true, for pred monotone (true at 0, false above some key)
    template <typename Pred>
    __device__ int search(Pred pred) const {
        int lo = 0, hi = 0xFFFF;
        while (lo < hi) {
            int mid = (lo + hi + 1) >> 1;
            if (pred(mid)) lo = mid; else hi = mid - 1;
        }
        return lo;
    }

    // the prefix's first position (in order) where the cumulative mass reaches target (strict: exceeds),
    // as a cutoff; false when the prefix's mass never does
    __device__ bool mass_cutoff(double target, bool strict, int v, int j, int &cv, int &cj) const {
        auto reaches = [&](double m) { return strict ? m > target : m >= target; };
        if (!reaches(mass_at_least(0, v, j))) return false;
        int t = search([&](int c) { return reaches(mass_at_least(c, v, j)); });
        double above = t < 0xFFFF ? mass_at_least(t + 1, v, j) : 0.0;
        int ties = count_at_least(t, v, j) - (t < 0xFFFF ? count_at_least(t + 1, v, j) : 0);
        // every tie has the same w; the first count whose cumulative mass reaches the target
        float wt = 0.f;
        for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) {
            if (key(i) == t && in_prefix(t, i, v, j)) wt = w[i];
        }
        wt = block_reduce(wt, reinterpret_cast<float *>(shd), [](float a, float b) { return fmaxf(a, b); });
        int m = max(1, min(ties, (int) ceil((target - above) / wt)));
        while (m > 1 && reaches(above + (m - 1) * (double) wt)) m--;
        while (m < ties && !reaches(above + m * (double) wt)) m++;
        cv = t;
        cj = tie_id(t, m, v, j);
        return true;
    }
};

// Top-k of at most SAMPLE_THREADS: the k kept tokens are found with two 256-bin histograms of the
// order keys (exact integer counts), gathered into shared memory, sorted by (key desc, id asc) with a
// bitonic network, and the rest of the rule runs over that sorted list as the host runs it, in double.
__device__ int sample_small_top_k(const SampleRow &row, int topK, double T, double topP, double minP, double u) {
    __shared__ int hist[256], ck[SAMPLE_THREADS], ci[SAMPLE_THREADS], cut[3];
    __shared__ double pr[SAMPLE_THREADS];
    const int n = row.n, tid = threadIdx.x;
    // the k-th key: its high byte, then its low byte
    int above = 0, high = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (tid < 256) hist[tid] = 0;
        __syncthreads();
        for (int i = tid; i < n; i += SAMPLE_THREADS) {
            int k = row.key(i);
            if (pass == 0) atomicAdd(&hist[k >> 8], 1);
            else if ((k >> 8) == high) atomicAdd(&hist[k & 0xFF], 1);
        }
        __syncthreads();
        if (tid == 0) {
            int cum = pass == 0 ? 0 : above, b = 255;
            while (b > 0 && cum + hist[b] < topK) cum += hist[b--];
            cut[0] = b;
            cut[1] = cum;
        }
        __syncthreads();
        if (pass == 0) high = cut[0];
        above = cut[1];
        __syncthreads();
    }
    const int t = (high << 8) | cut[0];
    const int j = row.tie_id(t, topK - above, 0, n - 1);
    // gather the prefix (exactly topK tokens) in id order, then sort it
    const int chunk = (n + SAMPLE_THREADS - 1) / SAMPLE_THREADS, lo = tid * chunk, hi = min(n, lo + chunk);
    int cnt = 0;
    for (int i = lo; i < hi; i++) cnt += in_prefix(row.key(i), i, t, j) ? 1 : 0;
    int slot = exclusive_scan(cnt);
    ck[tid] = -1;
    ci[tid] = 0x7FFFFFFF;
    __syncthreads();
    for (int i = lo; i < hi; i++) {
        int k = row.key(i);
        if (in_prefix(k, i, t, j)) {
            ck[slot] = k;
            ci[slot++] = i;
        }
    }
    __syncthreads();
    int size = 1;
    while (size < topK) size <<= 1;
    for (int len = 2; len <= size; len <<= 1) {
        for (int stride = len >> 1; stride > 0; stride >>= 1) {
            int other = tid ^ stride;
            if (tid < size && other > tid) {
                // ascending runs put the earlier token (higher key, then lower id) first
                bool firstRun = (tid & len) == 0;
                bool otherEarlier = ck[other] > ck[tid] || (ck[other] == ck[tid] && ci[other] < ci[tid]);
                if (otherEarlier == firstRun) {
                    int a = ck[tid], b = ci[tid];
                    ck[tid] = ck[other];
                    ci[tid] = ci[other];
                    ck[other] = a;
                    ci[other] = b;
                }
            }
            __syncthreads();
        }
    }
    // the host's rule over the sorted top k, in double
    const double max = key_value(ck[0]);
    if (tid < topK) pr[tid] = exp(((double) key_value(ck[tid]) - max) / T);
    __syncthreads();
    if (tid == 0) {
        int keep = topK;
        double sum = 0;
        for (int i = 0; i < keep; i++) sum += pr[i];
        for (int i = 0; i < keep; i++) pr[i] /= sum;
        if (minP > 0) {
            double floor = pr[0] * minP;
            int k = 1;
            while (k < keep && pr[k] >= floor) k++;
            keep = k;
        }
        if (topP < 1) {
            double cum = 0;
            int k = 0;
            while (k < keep) {
                cum += pr[k++];
                if (cum >= topP) break;
            }
            keep = k;
        }
        double total = 0;
        for (int i = 0; i < keep; i++) total += pr[i];
        double x = u * total;
        int pick = keep - 1;
        for (int i = 0; i < keep; i++) {
            x -= pr[i];
            if (x < 0) {
                pick = i;
                break;
            }
        }
        cut[2] = ci[pick];
    }
    __syncthreads();
    return cut[2];
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample(const bf16 *logits, int rows, int vocab, const double *params,
                                                                      float *scratch, int *out) {
    dependent_launch_entry();
    __shared__ double shd[34];
    __shared__ int shi[34];
    const int r = blockIdx.x;
    if (r >= rows) return;
    const double *pr = params + (long) r * 5;
    const double T = pr[0], topP = pr[2], minP = pr[3], u = pr[4];
    const int topK = (int) pr[1];
    if (T < 0) return;
    SampleRow row{reinterpret_cast<const unsigned short *>(logits) + (long) r * vocab, scratch + (long) r * vocab, vocab, shd, shi};
    if (T == 0) {
        // the first in order, the largest key and the lowest id among its equals, in one pass: each thread's best of its
        // ids (taken in increasing order, so the first of equals stays), packed as key << 32 | ~id so that one max over
        // the block prefers the larger key, then the lower id. 16 bytes a load where the rows are 16-byte aligned.
        long long best = -1;
        if (vocab % 8 == 0) {
            for (int c = threadIdx.x; c * 8 < vocab; c += SAMPLE_THREADS) {
                uint4 v = *reinterpret_cast<const uint4 *>(row.bits + 8 * c);
                const unsigned short *e = reinterpret_cast<const unsigned short *>(&v);
                #pragma unroll
                for (int j = 0; j < 8; j++) {
                    long long k = ((long long) order_key(e[j]) << 32) | (unsigned) ~(8 * c + j);
                    best = k > best ? k : best;
                }
            }
        } else {
            for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) {
                long long k = ((long long) row.key(i) << 32) | (unsigned) ~i;
                best = k > best ? k : best;
            }
        }
        __shared__ long long shl[34];
        best = block_reduce(best, shl, [](long long a, long long b) { return a > b ? a : b; });
        if (threadIdx.x == 0) out[r] = (int) ~(unsigned) (best & 0xFFFFFFFFLL);
        return;
    }
    // the first in order: the largest key, lowest id
    int best = 0;
    for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) best = max(best, row.key(i));
    const int top = block_reduce(best, shi, [](int a, int b) { return max(a, b); });
    if (topK > 0 && topK <= SAMPLE_THREADS && topK < vocab) {
        int id = sample_small_top_k(row, topK, T, topP, minP, u);
        if (threadIdx.x == 0) out[r] = id;
        return;
    }
    int v = 0, j = vocab - 1; // the kept prefix: everything
    if (topK > 0 && topK < vocab) {
        int t = row.search([&](int c) { return row.count_at_least(c, 0, vocab - 1) >= topK; });
        int above = t < 0xFFFF ? row.count_at_least(t + 1, 0, vocab - 1) : 0;
        j = row.tie_id(t, topK - above, 0, vocab - 1);
        v = t;
    }
    // w = exp((l - max) / T), the same for every token of one value
    const double lmax = key_value(top);
    float *w = scratch + (long) r * vocab;
    for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) {
        w[i] = (float) exp(((double) __bfloat162float(logits[(long) r * vocab + i]) - lmax) / T);
    }
    __syncthreads();
    const double sumK = row.mass_at_least(0, v, j);
    if (minP > 0) {
        // w is monotone in the key: the tokens with w >= minP are those at or above the lowest such key
        int lowest = 0x10000;
        for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) {
            int k = row.key(i);
            if (in_prefix(k, i, v, j) && w[i] >= minP) lowest = min(lowest, k);
        }
        lowest = block_reduce(lowest, shi, [](int a, int b) { return min(a, b); });
        if (lowest > v) {
            v = lowest;
            j = vocab - 1;
        }
    }
    if (topP < 1) {
        int cv, cj;
        if (row.mass_cutoff(topP * sumK, false, v, j, cv, cj) && (cv > v || (cv == v && cj < j))) {
            v = cv;
            j = cj;
        }
    }
    const double total = row.mass_at_least(0, v, j);
    int cv, cj;
    if (!row.mass_cutoff(u * total, true, v, j, cv, cj)) {
        // rounding left the target at the prefix's mass: its last token (lowest key, then highest id)
        int lowest = 0x10000;
        for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) {
            int k = row.key(i);
            if (in_prefix(k, i, v, j)) lowest = min(lowest, k);
        }
        lowest = block_reduce(lowest, shi, [](int a, int b) { return min(a, b); });
        int ties = row.count_at_least(lowest, v, j) - (lowest < 0xFFFF ? row.count_at_least(lowest + 1, v, j) : 0);
        cj = row.tie_id(lowest, ties, v, j);
    }
    if (threadIdx.x == 0) out[r] = cj;
}

// A DFlash / DFlash2 draft head's own kernels (the rest of its forward is the target's kernels: embed,
// rms_norm, rope, swiglu, residual_add, the linear layer).
//
// draft_attention: the blocks of several sequences at once. Row r of the step belongs to sequence
// rowSeq[r], whose seqs entry holds {ctxRows, ctxStart, position, row0, rows}: its queries (q, rows of
// heads x d) attend to its context keys/values (ctxKV[2 s], ctxKV[2 s + 1]: ctxRows rows of kvHeads x d,
// positions ctxStart..) and to its own block's (blkK, blkV rows row0 .. row0 + rows - 1, positions
// position..), bidirectional, within `window` positions when window > 0; GQA by head / (heads / kvHeads).
// fp32 scores, an online softmax (flash-style running max and sum), fp32 accumulation, the output rounded
// to bf16 once: sdpa's math, not bit-equal to the CPU twin's two-pass sum (the head's parity gate is KL
// to the fp32 reference). A row's arithmetic does not depend on the other sequences. Grid: (rows, heads),
// block DA_WARPS warps taking keys in turn (warp w: keys w, w + DA_WARPS, ...), two keys in flight a warp
// (their loads issued together, their updates applied in key order); a lane holds d / 32 dims (d <= 256),
// loaded 8 bytes at a time where d = 128. The warps' partial states are merged in shared memory in warp
// order. A CTA's keys are a chain (each update waits on the last), so its time is the chain's length:
// 8 warps with two keys in flight cut a 1,024-key context's chain from 256 dependent loads (4 warps, a key
// at a time) to 64 pairs, and at most 64 registers a thread keep 4 CTAs an SM (a 33B-shape block of 8 rows,
// 448 CTAs, in one wave).
#include "common.cuh"

#define DA_WARPS 8

// a lane's P consecutive dims of row p (from dim lane * P) as floats; 8 bytes at a time where P = 4
template <int P>
__device__ __forceinline__ void da_load(const bf16 *p, int lane, float *v) {
    if (P == 4) {
        const uint2 u = *reinterpret_cast<const uint2 *>(p + lane * 4);
        const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162 *>(&u.x), b = *reinterpret_cast<const __nv_bfloat162 *>(&u.y);
        v[0] = __low2float(a); v[1] = __high2float(a); v[2] = __low2float(b); v[3] = __high2float(b);
    } else {
        #pragma unroll
        for (int i = 0; i < P; i++) v[i] = ld(p, lane * P + i);
    }
}

// one (row, head): P = d / 32 dims a lane, known at compile time so that the lane's values stay in registers
template <int P>
__device__ __forceinline__ void da_row(const bf16 *q, const unsigned long long *ctxKV, const int *seqs, const int *rowSeq, const bf16 *blkK,
                                       const bf16 *blkV, bf16 *out, int r, int h, int heads, int kvHeads, int window, float *sm, float *sl,
                                       float (*sacc)[256]) {
    const int d = 32 * P, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int sq = rowSeq[r], *sd = seqs + 5 * sq;
    const int ctxRows = sd[0], ctxStart = sd[1], position = sd[2], row0 = sd[3], blockRows = sd[4];
    const bf16 *ctxK = reinterpret_cast<const bf16 *>(ctxKV[2 * sq]), *ctxV = reinterpret_cast<const bf16 *>(ctxKV[2 * sq + 1]);
    const int kv = h / (heads / kvHeads), kvw = kvHeads * d;
    const float scale = rsqrtf((float) d);
    float qv[P], acc[P];
    da_load<P>(q + ((long) r * heads + h) * d, lane, qv);
    #pragma unroll
    for (int i = 0; i < P; i++) acc[i] = 0.f;
    float m = -INFINITY, l = 0.f;
    const int qpos = position + (r - row0), keys = ctxRows + blockRows;
    for (int j0 = warp; j0 < keys; j0 += 2 * DA_WARPS) {
        float kx[2][P], vx[2][P], s[2];
        bool live[2];
        #pragma unroll
        for (int u = 0; u < 2; u++) { // both keys' loads first
            const int j = j0 + u * DA_WARPS;
            const bool fromCtx = j < ctxRows;
            const int kpos = fromCtx ? ctxStart + j : position + (j - ctxRows);
            live[u] = j < keys && !(window > 0 && abs(qpos - kpos) >= window);
            const long kr0 = fromCtx ? (long) j * kvw + kv * d : (long) (row0 + j - ctxRows) * kvw + kv * d;
            if (live[u]) {
                da_load<P>((fromCtx ? ctxK : blkK) + kr0, lane, kx[u]);
                da_load<P>((fromCtx ? ctxV : blkV) + kr0, lane, vx[u]);
            }
        }
        #pragma unroll
        for (int u = 0; u < 2; u++) {
            s[u] = 0.f;
            #pragma unroll
            for (int i = 0; i < P; i++) s[u] = fmaf(qv[i], live[u] ? kx[u][i] : 0.f, s[u]);
            #pragma unroll
            for (int o = 16; o > 0; o >>= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        }
        #pragma unroll
        for (int u = 0; u < 2; u++) { // the updates in key order
            if (!live[u]) continue;
            const float sc = s[u] * scale, mNew = fmaxf(m, sc), corr = expf(m - mNew), p = expf(sc - mNew);
            l = l * corr + p;
            #pragma unroll
            for (int i = 0; i < P; i++) acc[i] = fmaf(p, vx[u][i], acc[i] * corr);
            m = mNew;
        }
    }
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    #pragma unroll
    for (int i = 0; i < P; i++) sacc[warp][lane * P + i] = acc[i];
    __syncthreads();
    if (warp != 0) return;
    float M = -INFINITY;
    for (int w = 0; w < DA_WARPS; w++) M = fmaxf(M, sm[w]);
    float L = 0.f;
    float o[P];
    #pragma unroll
    for (int i = 0; i < P; i++) o[i] = 0.f;
    for (int w = 0; w < DA_WARPS; w++) {
        if (sm[w] == -INFINITY) continue;
        const float c = expf(sm[w] - M);
        L += sl[w] * c;
        #pragma unroll
        for (int i = 0; i < P; i++) o[i] += sacc[w][lane * P + i] * c;
    }
    #pragma unroll
    for (int i = 0; i < P; i++) st(out, ((long) r * heads + h) * d + lane * P + i, o[i] / L);
}

// head dims 32 .. 256 in steps of 32 (d / 32 dims a lane)
extern "C" __global__ void __launch_bounds__(32 * DA_WARPS, 4) draft_attention(const bf16 *q, const unsigned long long *ctxKV, const int *seqs,
                                                                             const int *rowSeq, const bf16 *blkK, const bf16 *blkV, bf16 *out,
                                                                             int rows, int heads, int kvHeads, int d, int window) {
    dependent_launch_entry();
    const int r = blockIdx.x, h = blockIdx.y;
    if (r >= rows || h >= heads) return;
    __shared__ float sm[DA_WARPS], sl[DA_WARPS], sacc[DA_WARPS][256]; // the warps' partial states
    switch (d / 32) {
        case 1: da_row<1>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 2: da_row<2>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 3: da_row<3>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 4: da_row<4>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 5: da_row<5>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 6: da_row<6>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        case 7: da_row<7>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
        default: da_row<8>(q, ctxKV, seqs, rowSeq, blkK, blkV, out, r, h, heads, kvHeads, window, sm, sl, sacc); break;
    }
}

// dyn_conv: DFlash2's grouped dynamic depthwise convolution over each block's rows (causal, zero before its
// block's first row: row t is row inBlock[t] of its block): out[t][c] = sum over taps o of
// bf16(out + bf16(base[o][c] * x[t-o][c])), then bf16(out + dyn[t][o][g] * x[t-o][c]) (the reference's order
// and roundings); dyn (rows, dynStride) holds [taps][groups] at column offset dynOffset.
// Grid: (rows, ceil(hidden / 256)), block 256.
extern "C" __global__ void dyn_conv(const bf16 *x, const bf16 *dyn, int dynStride, int dynOffset, const bf16 *base, bf16 *out,
                                    const int *inBlock, int rows, int hidden, int groupSize, int taps) {
    dependent_launch_entry();
    const int t = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (t >= rows || c >= hidden) return;
    const int groups = hidden / groupSize, g = c / groupSize, tb = inBlock[t];
    float acc = 0.f;
    for (int o = 0; o < taps; o++) {
        const float v = tb - o < 0 ? 0.f : ld(x, (long) (t - o) * hidden + c);
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

// selector_walk: DFlash2's candidate walk over a block's drafted rows on the device, the bits of
// CandidateSelector.walk's scores and picks (only ids, and for a sampled walk each row's candidates and q, come back).
// Per row r, in order: the k best ids of its logits (best first, ties lower id first); mixed_i =
// bf16(pred[prev][i] * proj[r][i]); each candidate's dot = fma(mixed_i, succ[id][i], dot) for i in order from 0,
// its score bf16(logit + bf16(dot)). Greedy (uniforms null): the first best score's id is the row's draft.
// Sampled: e_j = exp((score_j - best) / temperature) in double, summed in candidate order, q_j = float(e_j / sum)
// (to qOut[r k + j], the candidate's id to candOut[r k + j]); the draft is the host sampler's draw with the
// row's uniform: the candidates in id order, u minus each positive q_j until it is below zero (else the last).
// The draft is the next row's prev (the anchor before row 0).
// Grid 1 (one sequence's block), block SW_THREADS; k <= SW_MAX_K, rank <= SW_MAX_RANK (the host checks).
// Each thread keeps the k best of its ids t, t + SW_THREADS, ...; k rounds of a block-wide best take them.
#define SW_THREADS 1024
#define SW_MAX_K 32
#define SW_MAX_RANK 1024

// The warp's best (v, id): larger value first, then lower id; every lane ends with it
__device__ __forceinline__ void sw_warp_best(float &v, int &id) {
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, off);
        const int jd = __shfl_xor_sync(0xffffffffu, id, off);
        if (w > v || (w == v && jd < id)) {
            v = w;
            id = jd;
        }
    }
}

// A thread's list of the kk best (v, id) it was offered, best first; the ids it is offered ascend, so an equal value
// ranks after those kept
__device__ __forceinline__ void sw_keep(float *lv, int *li, int &n, int kk, float v, int id) {
    if (n == kk && !(v > lv[kk - 1])) return;
    int at = n < kk ? n++ : kk - 1;
    while (at > 0 && v > lv[at - 1]) {
        lv[at] = lv[at - 1];
        li[at] = li[at - 1];
        at--;
    }
    lv[at] = v;
    li[at] = id;
}

// kk rounds over a block of THREADS threads, each offering its list (n entries) best first: the block's j-th best goes
// to bestV[j], bestId[j] (shared), and its owner moves past it; past every list, -inf and id 0x7fffffff
template <int THREADS>
__device__ __forceinline__ void sw_block_best(const float *lv, const int *li, int n, int kk, float *bestV, int *bestId) {
    __shared__ float wv[THREADS / 32];
    __shared__ int wi[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int head = 0;
    for (int j = 0; j < kk; j++) {
        float v = head < n ? lv[head] : -INFINITY;
        int id = head < n ? li[head] : 0x7fffffff;
        sw_warp_best(v, id);
        if (lane == 0) {
            wv[warp] = v;
            wi[warp] = id;
        }
        __syncthreads();
        if (warp == 0) {
            v = lane < THREADS / 32 ? wv[lane] : -INFINITY;
            id = lane < THREADS / 32 ? wi[lane] : 0x7fffffff;
            sw_warp_best(v, id);
            if (lane == 0) {
                bestV[j] = v;
                bestId[j] = id;
            }
        }
        __syncthreads();
        if (head < n && li[head] == bestId[j]) head++;
    }
}

// row_topk: the first pass of a walk's top-k, over every drafted row at once: part p of row r (grid (rows, parts))
// takes ids [p span, (p + 1) span), span = ceil(vocab / parts), and writes its k best, best first, ties lower id
// first (past its ids: -inf and id 0x7fffffff, which rank after every id), to partV / partI [r][p][k]. The k best
// of a row are the k best of its parts' (the order is total), which selector_walk then takes from these.
#define TK_THREADS 256
extern "C" __global__ void __launch_bounds__(TK_THREADS) row_topk(const bf16 *logits, int vocab, int k, float *partV, int *partI) {
    dependent_launch_entry();
    __shared__ float topV[SW_MAX_K];
    __shared__ int topI[SW_MAX_K];
    const int r = blockIdx.x, p = blockIdx.y, parts = gridDim.y, t = threadIdx.x, kk = min(k, vocab);
    const int span = (vocab + parts - 1) / parts, lo = p * span, hi = min(vocab, lo + span);
    const bf16 *row = logits + (long) r * vocab;
    float lv[SW_MAX_K];
    int li[SW_MAX_K], n = 0;
    for (int id = lo + t; id < hi; id += TK_THREADS) sw_keep(lv, li, n, kk, ld(row, id), id);
    sw_block_best<TK_THREADS>(lv, li, n, kk, topV, topI);
    if (t < kk) {
        partV[((long) r * parts + p) * k + t] = topV[t];
        partI[((long) r * parts + p) * k + t] = topI[t];
    }
}

// With parts > 0 the walk takes each row's candidates from row_topk's parts (parts x k <= SW_THREADS: a thread
// holds at most one, so the block-wide rounds alone order them) instead of scanning the row's vocab itself.
extern "C" __global__ void __launch_bounds__(SW_THREADS) selector_walk(const bf16 *logits, int rows, int vocab, const bf16 *proj, int rank, int k,
                                                                       const bf16 *pred, const bf16 *succ, int anchor, int *out, const double *uniforms,
                                                                       double temperature, float *qOut, int *candOut, const float *partV,
                                                                       const int *partI, int parts) {
    dependent_launch_entry();
    __shared__ float mixed[SW_MAX_RANK];
    __shared__ int cand[SW_MAX_K];
    __shared__ float candV[SW_MAX_K], qs[SW_MAX_K];
    __shared__ int next;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, kk = min(k, vocab);
    int prev = anchor;
    for (int r = 0; r < rows; r++) {
        const bf16 *row = logits + (long) r * vocab;
        float lv[SW_MAX_K];
        int li[SW_MAX_K], n = 0;
        if (parts > 0) {
            const int e = t; // parts x kk <= SW_THREADS: one candidate a thread at most
            if (e < parts * kk) {
                const long at = ((long) r * parts + e / kk) * k + e % kk;
                lv[0] = partV[at];
                li[0] = partI[at];
                n = 1;
            }
        }
        for (int id = parts > 0 ? vocab : t; id < vocab; id += SW_THREADS) sw_keep(lv, li, n, kk, ld(row, id), id);
        sw_block_best<SW_THREADS>(lv, li, n, kk, candV, cand); // the row's k best, best first: its candidates
        for (int i = t; i < rank; i += SW_THREADS) mixed[i] = rnd(__fmul_rn(ld(pred, (long) prev * rank + i), ld(proj, (long) r * rank + i)));
        __syncthreads();
        if (warp == 0) {
            // candidate j = lane; the first best score (lowest j among equals)
            float score = -INFINITY;
            if (lane < kk) {
                const int id = cand[lane];
                float dot = 0.f;
                for (int i = 0; i < rank; i++) dot = __fmaf_rn(mixed[i], ld(succ, (long) id * rank + i), dot);
                score = rnd(__fadd_rn(ld(row, id), rnd(dot)));
            }
            int j = lane < kk ? lane : 0x7fffffff;
            float best = score;
            sw_warp_best(best, j);
            if (uniforms == nullptr) {
                if (lane == 0) {
                    next = cand[j];
                    out[r] = next;
                }
            } else {
                const double e = lane < kk ? exp((double) __fsub_rn(score, best) / temperature) : 0.0;
                double sum = 0.0;
                for (int c = 0; c < kk; c++) sum += __shfl_sync(0xffffffffu, e, c);
                if (lane < kk) {
                    qs[lane] = (float) (e / sum);
                    qOut[(long) r * k + lane] = qs[lane];
                    candOut[(long) r * k + lane] = cand[lane];
                }
                __syncwarp();
                if (lane == 0) {
                    double u = uniforms[r];
                    int last = -1, pick = -1, after = -1;
                    for (int step = 0; step < kk && pick < 0; step++) {
                        int at = -1; // the candidate of the next larger id
                        for (int c = 0; c < kk; c++) {
                            if (cand[c] > after && (at < 0 || cand[c] < cand[at])) at = c;
                        }
                        after = cand[at];
                        if (qs[at] > 0.f) {
                            last = cand[at];
                            u -= qs[at];
                            if (u < 0) pick = cand[at];
                        }
                    }
                    next = pick >= 0 ? pick : last;
                    out[r] = next;
                }
            }
        }
        __syncthreads();
        prev = next;
        __syncthreads(); // next and mixed are written again for the next row
    }
}

// scatter_kv: a draft head's injected K and V rows after each row's own context: row r of k (blockIdx.y 0) or
// v (1), width bf16 (a multiple of 8), to the address kAddr[r] or vAddr[r]. Grid (rows, 2), block 128.
extern "C" __global__ void scatter_kv(const bf16 *k, const bf16 *v, int width, const unsigned long long *kAddr, const unsigned long long *vAddr,
                                      int rows) {
    dependent_launch_entry();
    const int r = blockIdx.x;
    if (r >= rows) return;
    const uint4 *src = reinterpret_cast<const uint4 *>((blockIdx.y ? v : k) + (long) r * width);
    uint4 *dst = reinterpret_cast<uint4 *>((blockIdx.y ? vAddr : kAddr)[r]);
    for (int i = threadIdx.x; i < width / 8; i += blockDim.x) dst[i] = src[i];
}

// gather_taps: a draft head's injected rows from its target's tap buffer ([taps][stepRows][hidden]): feat row r
// ([taps x hidden]) holds the buffer's row rowIdx[r] of each tap in turn. Grid (rows, taps), block 128.
extern "C" __global__ void gather_taps(const bf16 *tapBuf, int stepRows, int hidden, int taps, const int *rowIdx, bf16 *feat, int rows) {
    dependent_launch_entry();
    const int r = blockIdx.x, t = blockIdx.y;
    if (r >= rows || t >= taps) return;
    const bf16 *src = tapBuf + ((long) t * stepRows + rowIdx[r]) * hidden;
    bf16 *dst = feat + ((long) r * taps + t) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
}

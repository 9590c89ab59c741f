/* Tail-biting Viterbi search for EXL3 trellis tiles (scripts/make_exl3_fixture.py builds and loads this with ctypes).
 *
 * A tile is 256 weights; weight t's 16-bit state is s_t = ((s_{t-1} << K) | c_t) & 0xffff, c_t its K new bits, and the
 * state before weight 0 is the last one's (tail-biting: the top 16-K bits of s_0 are the low 16-K bits of s_255). The
 * search minimizes sum_t (table[s_t] - y_t)^2 over every path: a first pass over the tile rotated by half, free at both
 * ends, fixes the wrap's 16-K bits; the second pass runs the tile in order with both ends held to them. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void pass(const float *table, const float *y, int K, int o, uint16_t *path, float *cost, float *next, float *m, uint8_t *bp) {
    const int P = 1 << (16 - K), C = 1 << K;
    for (int s = 0; s < 65536; s++) {
        float d = table[s] - y[0];
        cost[s] = (o < 0 || (s >> K) == o) ? d * d : FLT_MAX;
    }
    for (int t = 1; t < 256; t++) {
        uint8_t *b = bp + (size_t) t * P;
        for (int p = 0; p < P; p++) {
            m[p] = cost[p];
            b[p] = 0;
        }
        for (int h = 1; h < C; h++) {
            const float *c = cost + (size_t) h * P;
            for (int p = 0; p < P; p++) {
                int less = c[p] < m[p];
                m[p] = less ? c[p] : m[p];
                b[p] = less ? (uint8_t) h : b[p];
            }
        }
        for (int p = 0; p < P; p++) {
            const float *ts = table + ((size_t) p << K);
            float *ns = next + ((size_t) p << K), mp = m[p], yt = y[t];
            for (int c = 0; c < C; c++) {
                float d = ts[c] - yt;
                ns[c] = mp + d * d;
            }
        }
        float *swap = cost;
        cost = next;
        next = swap;
    }
    int best = -1;
    for (int s = 0; s < 65536; s++) {
        if ((o < 0 || (s & (P - 1)) == o) && (best < 0 || cost[s] < cost[best])) {
            best = s;
        }
    }
    path[255] = (uint16_t) best;
    for (int t = 255; t > 0; t--) {
        int s = path[t];
        path[t - 1] = (uint16_t) ((bp[(size_t) t * P + (s >> K)] << (16 - K)) | (s >> K));
    }
}

/* y: tiles x 256 targets in trellis order; codes: tiles x 256 K-bit codes out. */
void exl3_viterbi(const float *table, const float *y, int tiles, int K, int16_t *codes) {
    #pragma omp parallel
    {
        const int P = 1 << (16 - K);
        float *cost = malloc(65536 * sizeof(float)), *next = malloc(65536 * sizeof(float)), *m = malloc(P * sizeof(float));
        uint8_t *bp = malloc((size_t) 256 * P);
        float rot[256];
        uint16_t path[256];
        #pragma omp for schedule(dynamic, 16)
        for (int i = 0; i < tiles; i++) {
            const float *yi = y + (size_t) i * 256;
            for (int t = 0; t < 256; t++) {
                rot[t] = yi[(t + 128) % 256];
            }
            pass(table, rot, K, -1, path, cost, next, m, bp);
            int o = path[127] & (P - 1); /* the state of weight 255 in the rotated order */
            pass(table, yi, K, o, path, cost, next, m, bp);
            for (int t = 0; t < 256; t++) {
                codes[(size_t) i * 256 + t] = (int16_t) (path[t] & ((1 << K) - 1));
            }
        }
        free(cost);
        free(next);
        free(m);
        free(bp);
    }
}

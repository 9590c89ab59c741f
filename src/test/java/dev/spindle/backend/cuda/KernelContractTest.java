package dev.spindle.backend.cuda;

import dev.spindle.backend.CandidateSelector;
import dev.spindle.backend.KeySplits;
import dev.spindle.backend.cpu.CpuKernels;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.model.Bf16;
import dev.spindle.sample.Sampler;
import dev.spindle.sample.SamplerTest;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.DraftHead;
import dev.spindle.step.ModelStep;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Each CUDA kernel against its CPU twin (the reference backend's kernel), on random
 * inputs of real shapes: exact where the math allows (embed, rope, residual_add), within
 * one bf16 ulp per element where only the reduction order (rms_norm) or expf (swiglu)
 * differ. Runs where a GPU and the compiled kernels are; skipped elsewhere, saying why.
 */
@RequiresGpu
class KernelContractTest {
    static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static CudaKernels k;
    static CudaDriver cuda;
    final Random rnd = new Random(1);

    @BeforeAll
    static void gpu() {
        k = RequiresGpu.Kernels.load();
        cuda = k.driver();
        System.out.println("[cuda] contract tests on " + cuda.deviceName());
    }

    float[] randomBf16(int n, float scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = Bf16.round((float) rnd.nextGaussian() * scale);
        }
        return a;
    }

    long upload(Arena arena, float[] bf16Values) {
        MemorySegment h = arena.allocate(bf16Values.length * 2L);
        for (int i = 0; i < bf16Values.length; i++) {
            h.setAtIndex(BF16, i, Bf16.fromFloat(bf16Values[i]));
        }
        long d = cuda.alloc(h.byteSize());
        cuda.copyToDevice(d, h);
        return d;
    }

    long uploadF32(Arena arena, float[] values) {
        MemorySegment h = arena.allocateFrom(ValueLayout.JAVA_FLOAT, values);
        long d = cuda.alloc(h.byteSize());
        cuda.copyToDevice(d, h);
        return d;
    }

    float[] download(Arena arena, long d, int n) {
        MemorySegment h = arena.allocate(n * 2L);
        cuda.copyToHost(h, d);
        float[] out = new float[n];
        for (int i = 0; i < n; i++) {
            out[i] = Bf16.toFloat(h.getAtIndex(BF16, i));
        }
        return out;
    }

    static MemorySegment bf16Segment(Arena arena, float[] v) {
        MemorySegment s = arena.allocate(v.length * 2L);
        for (int i = 0; i < v.length; i++) {
            s.setAtIndex(BF16, i, Bf16.fromFloat(v[i]));
        }
        return s;
    }

    /** Max difference in bf16 ulps (of the larger magnitude), and how many elements differ at all. */
    static int[] compare(float[] want, float[] got) {
        int maxUlps = 0, differ = 0;
        for (int i = 0; i < want.length; i++) {
            if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                differ++;
                int a = Float.floatToRawIntBits(want[i]) >> 16, b = Float.floatToRawIntBits(got[i]) >> 16;
                maxUlps = Math.max(maxUlps, Math.abs(a - b));
            }
        }
        return new int[]{maxUlps, differ};
    }

    /**
     * The largest |diff| / bound of a GEMM's outputs against the CPU linear layer: the bound is the
     * result's bf16 rounding step plus an fp32 accumulation error of 2^-16 of the sum of |x_i w_i|.
     */
    static double worstLinearRatio(float[] x, float[] w, float[] want, float[] got, int n, int k, int nOut) {
        double worst = 0;
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < nOut; j++) {
                double sumAbs = 0;
                for (int i = 0; i < k; i++) {
                    sumAbs += Math.abs((double) x[r * k + i] * w[j * k + i]);
                }
                float p = want[r * nOut + j], q = got[r * nOut + j];
                double bound = Math.scalb(1.0, Math.getExponent(Math.max(Math.abs(p), Math.abs(q))) - 7) + Math.scalb(sumAbs, -16);
                worst = Math.max(worst, Math.abs(p - q) / bound);
            }
        }
        return worst;
    }

    @Test
    void embedIsExact() {
        try (Arena a = Arena.ofConfined()) {
            int vocab = 1000, hidden = 2560, rows = 7;
            float[] table = randomBf16(vocab * hidden, 1);
            int[] tokens = {5, 999, 0, 42, 42, 7, 500};
            float[] want = new float[rows * hidden];
            CpuKernels.embed(tokens, bf16Segment(a, table), vocab, hidden, want);
            long dt = upload(a, table), dout = cuda.alloc(rows * hidden * 2L);
            long dtok = cuda.alloc(tokens.length * 4L);
            cuda.copyToDevice(dtok, a.allocateFrom(ValueLayout.JAVA_INT, tokens));
            k.embed(dtok, dt, dout, rows, hidden);
            int[] c = compare(want, download(a, dout, rows * hidden));
            assertEquals(0, c[1], "embed differs in " + c[1] + " elements");
        }
    }

    /** bf16-valued cos and sin of random angles, as the RoPE tables hold. */
    void randomRotary(float[] cos, float[] sin) {
        for (int i = 0; i < cos.length; i++) {
            double ang = rnd.nextDouble() * 100;
            cos[i] = Bf16.round((float) Math.cos(ang));
            sin[i] = Bf16.round((float) Math.sin(ang));
        }
    }

    @Test
    void ropeIsExact() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 9, heads = 8 + 2, hd = 128, half = hd / 2, positions = 50, stride = (8 + 2 * 2) * hd;
            float[] x = randomBf16(rows * stride, 1);
            float[] cosT = new float[positions * half], sinT = new float[positions * half];
            randomRotary(cosT, sinT);
            int[] pos = rnd.ints(rows, 0, positions).toArray();
            float[] want = x.clone();
            for (int r = 0; r < rows; r++) {
                // the twin works on packed (n, heads, hd) rows with per-row cos/sin
                float[] row = java.util.Arrays.copyOfRange(want, r * stride, r * stride + heads * hd);
                CpuKernels.rope(row, 1, heads, hd, java.util.Arrays.copyOfRange(cosT, pos[r] * half, pos[r] * half + half),
                        java.util.Arrays.copyOfRange(sinT, pos[r] * half, pos[r] * half + half));
                System.arraycopy(row, 0, want, r * stride, row.length);
            }
            long dx = upload(a, x), dc = uploadF32(a, cosT), ds = uploadF32(a, sinT);
            long dp = cuda.alloc(rows * 4L);
            cuda.copyToDevice(dp, a.allocateFrom(ValueLayout.JAVA_INT, pos));
            k.rope(dx, stride, dc, ds, dp, rows, heads, hd);
            int[] c = compare(want, download(a, dx, x.length));
            assertEquals(0, c[1], "rope differs in " + c[1] + " elements");
        }
    }

    /** rope_kv_write gives exactly what rope followed by kv_write gives: the qkv rows and the pool. */
    @Test
    void ropeKvWriteIsRopeThenKvWrite() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 11, qHeads = 14, kvHeads = 2, hd = 128, half = hd / 2, positions = 64, bs = 16;
            int qd = qHeads * hd, kvd = kvHeads * hd, stride = qd + 2 * kvd, blocks = 4;
            float[] x = randomBf16(rows * stride, 1);
            float[] cosT = new float[positions * half], sinT = new float[positions * half];
            randomRotary(cosT, sinT);
            int[] pos = rnd.ints(rows, 0, positions).toArray();
            int[] slotMap = new int[rows];
            for (int r = 0; r < rows; r++) {
                slotMap[r] = (blocks - 1 - r % blocks) * bs + (r * 5) % bs;
            }
            long dc = uploadF32(a, cosT), ds = uploadF32(a, sinT), dp = cuda.alloc(rows * 4L), dslot = cuda.alloc(rows * 4L);
            cuda.copyToDevice(dp, a.allocateFrom(ValueLayout.JAVA_INT, pos));
            cuda.copyToDevice(dslot, a.allocateFrom(ValueLayout.JAVA_INT, slotMap));
            long poolBytes = (long) blocks * 2 * bs * kvd * 2;
            long x1 = upload(a, x), x2 = upload(a, x), pool1 = cuda.alloc(poolBytes), pool2 = cuda.alloc(poolBytes);
            cuda.memsetZero(pool1, poolBytes);
            cuda.memsetZero(pool2, poolBytes);
            k.rope(x1, stride, dc, ds, dp, rows, qHeads + kvHeads, hd);
            k.kvWrite(x1, stride, qd, kvd, hd, pool1, dslot, bs, rows);
            k.ropeKvWrite(x2, stride, dc, ds, dp, rows, qHeads, kvHeads, hd, pool2, dslot, bs);
            assertEquals(0, compare(download(a, x1, x.length), download(a, x2, x.length))[1], "the qkv rows differ");
            int poolElems = (int) (poolBytes / 2);
            assertEquals(0, compare(download(a, pool1, poolElems), download(a, pool2, poolElems))[1], "the pools differ");
        }
    }

    /**
     * A decode row through the split path (split CTAs, then attention_merge) equals the same row computed by
     * the prefill kernel, bit for bit, at contexts of 1 to 194 splits (of 128, 256 and 512 keys: KeySplits): the merge's chunking and staging
     * (16 or 32 splits a chunk, a warp per 32 or per 128 dims) must not change the split-order arithmetic. KV blocks
     * of 16 keys (the default), 4 (a 64-key tile spans 16 blocks) and 128 (a split lies in one block); 4, 12
     * and 7 query heads a KV head (a decode CTA's upper 8 MMA rows empty, used, and empty with 7 used below); head
     * dim 16, and 128 (the 33B's, where the wgmma prefill and the warp-specialised ones run on sm_90a and must give the same
     * bits, the latter on CTAs of up to 128 MMA rows ending at each decode row; blocks of 8, 16 and 128 keys, where
     * their copies take one, two or eight keys of a block a thread and tile). The pool's unwritten slots hold NaNs.
     */
    @ParameterizedTest
    @CsvSource({"16, 4, 16", "4, 12, 16", "128, 7, 16", "16, 7, 128", "8, 7, 128", "128, 5, 128"})
    void decodeSplitPathEqualsPhaseZeroAtLongContext(int bs, int group, int hd) {
        int kvHeads = 2, heads = group * kvHeads, qd = heads * hd, kvd = kvHeads * hd, stride = qd + 2 * kvd;
        int ctx = 33_500;
        int[] decode = {ctx - 1, 32_800, 16_400, 8_200, 4_100, 127, 0};
        try (Arena a = Arena.ofConfined()) {
            float[] rows = randomBf16(ctx * stride, 1);
            long dq = upload(a, rows);
            int blocks = (ctx + bs - 1) / bs;
            int[] table = new int[blocks], slotMap = new int[ctx];
            for (int b = 0; b < blocks; b++) {
                table[b] = (b * 7919) % blocks; // a permutation (7919 is prime and does not divide blocks)
            }
            for (int p = 0; p < ctx; p++) {
                slotMap[p] = table[p / bs] * bs + p % bs;
            }
            long poolBytes = (long) blocks * 2 * bs * kvd * 2;
            long dpool = cuda.alloc(poolBytes), dslot = cuda.alloc(ctx * 4L), dtab = cuda.alloc(blocks * 4L);
            // the slots no key was written to hold NaNs: no kernel may let them into a row (p = 0 times NaN is NaN)
            cuda.memset(dpool, (byte) 0xFF, poolBytes);
            cuda.copyToDevice(dslot, a.allocateFrom(ValueLayout.JAVA_INT, slotMap));
            cuda.copyToDevice(dtab, a.allocateFrom(ValueLayout.JAVA_INT, table));
            k.kvWrite(dq, stride, qd, kvd, hd, dpool, dslot, bs, ctx);
            java.util.List<int[]> desc = new java.util.ArrayList<>(), cdesc = new java.util.ArrayList<>(), zero = new java.util.ArrayList<>();
            java.util.List<int[]> folded = new java.util.ArrayList<>();
            int part = 0;
            for (int i = 0; i < decode.length; i++) {
                int p = decode[i], splits = KeySplits.count(p + 1);
                cdesc.add(new int[]{part, splits, i});
                for (int s = 0; s < splits; s += 3) {
                    desc.add(new int[]{p, 1, p, 0, s, Math.min(s + 3, splits), part + s, i});
                }
                // the decode kernel walking all of the row's splits and folding them itself (no partial slot), output row i
                folded.add(new int[]{i, 1, p, 0, 0, splits, -1, i});
                part += splits;
                // phase 0 writes row r of its output at qkv row r: the decode row alone, at its position
                zero.add(new int[]{p, 1, p, 0, 0, splits, -1, 0});
            }
            long ddesc = cuda.alloc(desc.size() * 32L), dzero = cuda.alloc(zero.size() * 32L), dcd = cuda.alloc(cdesc.size() * 12L);
            cuda.copyToDevice(ddesc, a.allocateFrom(ValueLayout.JAVA_INT, desc.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
            cuda.copyToDevice(dzero, a.allocateFrom(ValueLayout.JAVA_INT, zero.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
            cuda.copyToDevice(dcd, a.allocateFrom(ValueLayout.JAVA_INT, cdesc.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
            long splitOut = cuda.alloc((long) decode.length * qd * 2), zeroOut = cuda.alloc((long) ctx * qd * 2);
            long partO = cuda.alloc((long) part * heads * hd * 4), partML = cuda.alloc((long) part * heads * 8);
            float scale = (float) Math.pow(hd, -0.5);
            k.attention(AttentionKernels.DECODE, desc.size(), dq, stride, splitOut, dpool, dtab, ddesc, partO, partML, heads, kvHeads, hd, bs, scale);
            // both merge kernels (a warp per 32 dims in a CTA per head, a warp per 128 dims): the same bits
            float[][] merged = new float[2][];
            for (int kernel : new int[]{CudaKernels.MERGE_WIDE, CudaKernels.MERGE}) {
                cuda.memsetZero(splitOut, (long) decode.length * qd * 2);
                k.attentionMergeBy(kernel, decode.length, partO, partML, dcd, splitOut, heads, hd);
                merged[kernel] = download(a, splitOut, decode.length * qd);
            }
            // warp pairs are left out on GPUs with 99 KiB of shared memory a block: then the last kernel run is the reference
            if (k.hasAttention(hd, AttentionKernels.PREFILL_WARP_PAIRS)) {
                k.attention(AttentionKernels.PREFILL_WARP_PAIRS, zero.size(), dq, stride, zeroOut, dpool, dtab, dzero, partO, partML, heads, kvHeads, hd, bs, scale);
            }
            float[] pairs = download(a, zeroOut, ctx * qd);
            k.attention(AttentionKernels.PREFILL, zero.size(), dq, stride, zeroOut, dpool, dtab, dzero, partO, partML, heads, kvHeads, hd, bs, scale);
            float[] split = download(a, splitOut, decode.length * qd), whole = download(a, zeroOut, ctx * qd);
            // decode rows folded in their CTA read their queries at qkv row i: the decode rows' queries copied there
            long fq = cuda.alloc((long) decode.length * stride * 2), fdesc = cuda.alloc(folded.size() * 32L), foldOut = cuda.alloc((long) decode.length * qd * 2);
            for (int i = 0; i < decode.length; i++) {
                cuda.copyDeviceToDevice(fq + (long) i * stride * 2, dq + (long) decode[i] * stride * 2, (long) stride * 2);
            }
            cuda.copyToDevice(fdesc, a.allocateFrom(ValueLayout.JAVA_INT, folded.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
            k.attention(AttentionKernels.DECODE, folded.size(), fq, stride, foldOut, dpool, dtab, fdesc, partO, partML, heads, kvHeads, hd, bs, scale);
            float[] foldedRows = download(a, foldOut, decode.length * qd);
            assertEquals(0, compare(whole, pairs)[1], "prefill with warp pairs differs from one warp per row group");
            // the wgmma prefill (sm_90a) computes the same bits
            if (k.hasAttention(hd, AttentionKernels.PREFILL_WGMMA)) {
                cuda.memsetZero(zeroOut, (long) ctx * qd * 2);
                k.attention(AttentionKernels.PREFILL_WGMMA, zero.size(), dq, stride, zeroOut, dpool, dtab, dzero, partO, partML, heads, kvHeads, hd, bs, scale);
                assertEquals(0, compare(whole, download(a, zeroOut, ctx * qd))[1], "the wgmma prefill differs from one warp per row group");
            }
            // the warp-specialised prefills (sm_90a): CTAs of up to 128 MMA rows, each ending at a decode row with the rows
            // before it (in both consumer warpgroups), the same bits at the decode rows
            for (int ws : AttentionKernels.WARP_SPECIALIZED) {
                if (!k.hasAttention(hd, ws)) {
                    continue;
                }
                java.util.List<int[]> tiles = new java.util.ArrayList<>();
                for (int p : decode) {
                    int r = Math.min(AttentionKernels.attentionTileRows(ws) / group, p + 1);
                    tiles.add(new int[]{p - r + 1, r, p - r + 1, 0, 0, KeySplits.count(p + 1), -1, 0});
                }
                long dtiles = cuda.alloc(tiles.size() * 32L);
                cuda.copyToDevice(dtiles, a.allocateFrom(ValueLayout.JAVA_INT, tiles.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
                cuda.memsetZero(zeroOut, (long) ctx * qd * 2);
                k.attention(ws, tiles.size(), dq, stride, zeroOut, dpool, dtab, dtiles, partO, partML, heads, kvHeads, hd, bs, scale);
                float[] wsOut = download(a, zeroOut, ctx * qd);
                for (int p : decode) {
                    assertEquals(0, compare(java.util.Arrays.copyOfRange(whole, p * qd, (p + 1) * qd), java.util.Arrays.copyOfRange(wsOut, p * qd, (p + 1) * qd))[1],
                            "the warp-specialised prefill " + AttentionKernels.ATTENTION_KERNELS.get(ws) + " differs from one warp per row group at position " + p);
                }
            }
            for (int i = 0; i < decode.length; i++) {
                float[] want = java.util.Arrays.copyOfRange(whole, decode[i] * qd, (decode[i] + 1) * qd);
                float[] got = java.util.Arrays.copyOfRange(split, i * qd, (i + 1) * qd);
                assertEquals(0, compare(want, got)[1], "decode row at position " + decode[i] + " differs from the prefill kernel");
                assertEquals(0, compare(want, java.util.Arrays.copyOfRange(foldedRows, i * qd, (i + 1) * qd))[1],
                        "decode row at position " + decode[i] + " folded in its CTA differs from the prefill kernel");
                float[] wide = java.util.Arrays.copyOfRange(merged[CudaKernels.MERGE_WIDE], i * qd, (i + 1) * qd);
                assertEquals(0, compare(want, wide)[1], "decode row at position " + decode[i] + " through attention_merge_wide differs from the prefill kernel");
            }
            System.out.println("[cuda] decode split path = prefill (one warp per row group = warp pairs), KV blocks of " + bs + ", "
                    + group + " query heads a KV head, at "
                    + java.util.Arrays.toString(decode) + " (up to "
                    + KeySplits.count(decode[0] + 1) + " splits)");
        }
    }

    @Test
    void residualAddIsExact() {
        try (Arena a = Arena.ofConfined()) {
            int n = 3 * 7168;
            float[] x = randomBf16(n, 3), y = randomBf16(n, 0.1f);
            long dx = upload(a, x), dy = upload(a, y);
            float[] want = x.clone();
            CpuKernels.addInto(want, y, n);
            k.residualAdd(dx, dy, n);
            assertEquals(0, compare(want, download(a, dx, n))[1]);
        }
    }

    @Test
    void rmsNormWithinOneUlp() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 5, width = 7168;
            float[] x = randomBf16(rows * width, 2), w = randomBf16(width, 1);
            float[] want = new float[x.length];
            CpuKernels.rmsNorm(x, rows, width, bf16Segment(a, w), 1e-5f, want);
            long dx = upload(a, x), dw = upload(a, w), dout = cuda.alloc(x.length * 2L);
            k.rmsNorm(dx, dw, dout, rows, width, 1e-5f);
            int[] c = compare(want, download(a, dout, x.length));
            System.out.printf("[cuda] rms_norm: %d of %d elements differ from the CPU twin, by at most %d bf16 ulp%n", c[1], x.length, c[0]);
            assertTrue(c[0] <= 1, "rms_norm off by " + c[0] + " ulps");
        }
    }

    @Test
    void addRmsNormAddsExactlyAndNormsWithinOneUlp() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 3, width = 3072;
            float[] x = randomBf16(rows * width, 2), y = randomBf16(rows * width, 0.5f), w = randomBf16(width, 1);
            float[] sum = x.clone();
            CpuKernels.addInto(sum, y, sum.length);
            float[] want = new float[x.length];
            CpuKernels.rmsNorm(sum, rows, width, bf16Segment(a, w), 1e-5f, want);
            long dx = upload(a, x), dy = upload(a, y), dw = upload(a, w), dout = cuda.alloc(x.length * 2L);
            k.addRmsNorm(dx, dy, dw, dout, rows, width, 1e-5f);
            assertEquals(0, compare(sum, download(a, dx, x.length))[1], "the residual add must be exact");
            int[] c = compare(want, download(a, dout, x.length));
            System.out.printf("[cuda] add_rms_norm: %d of %d elements differ from the CPU twin, by at most %d bf16 ulp%n", c[1], x.length, c[0]);
            assertTrue(c[0] <= 1, "add_rms_norm off by " + c[0] + " ulps");
        }
    }

    /**
     * cuBLAS bf16 GEMM (fp32 accumulation, one rounding) against the CPU linear layer. The two
     * sum in different orders, so the bound is the bf16 rounding step of the result plus an fp32
     * accumulation error of 2^-16 of the sum of |x_i w_i| (an output near zero may then differ
     * by several of its own ulps).
     */
    @Test
    void cublasLinearWithinBoundAndBatchInvariant() {
        CublasLt blas = RequiresGpu.Kernels.cublasLt(k);
        try (Arena a = Arena.ofConfined()) {
            int n = 7, k = 2560, nOut = 1024;
            float[] x = randomBf16(n * k, 1), w = randomBf16(nOut * k, 0.02f);
            float[] want = new float[n * nOut];
            CpuKernels.linear(x, n, k, bf16Segment(a, w), nOut, want);
            long dx = upload(a, x), dw = upload(a, w), dy = cuda.alloc(n * nOut * 2L);
            blas.linear(dx, n, k, dw, nOut, dy);
            float[] got = download(a, dy, n * nOut);
            int[] c = compare(want, got);
            double worst = worstLinearRatio(x, w, want, got, n, k, nOut);
            System.out.printf("[cuda] cublas linear (7 x 2560 x 1024): %d of %d outputs differ from the CPU twin; worst |diff| / bound = %.3f%n",
                    c[1], n * nOut, worst);
            assertTrue(worst <= 1, "cuBLAS linear exceeds its bound: " + worst);
            // the pinned algorithm: a row's bits do not depend on how many rows share the call
            int big = 300;
            float[] xs = randomBf16(big * k, 1);
            long dxs = upload(a, xs), dys = cuda.alloc((long) big * nOut * 2);
            blas.linear(dxs, big, k, dw, nOut, dys);
            float[] all = download(a, dys, big * nOut);
            for (int rows : new int[]{1, 7, 64, 129}) {
                blas.linear(dxs, rows, k, dw, nOut, dys);
                float[] part = download(a, dys, rows * nOut);
                assertEquals(0, compare(java.util.Arrays.copyOf(all, rows * nOut), part)[1], rows + " rows differ from the same rows among " + big);
            }
            blas.choices().forEach(line -> System.out.println("[cuda] cublasLt pinned " + line));
        }
    }

    @Test
    void swigluWithinOneUlp() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 4, width = 22016;
            float[] gu = randomBf16(rows * 2 * width, 3);
            float[] g = new float[rows * width], u = new float[rows * width];
            for (int r = 0; r < rows; r++) {
                System.arraycopy(gu, r * 2 * width, g, r * width, width);
                System.arraycopy(gu, r * 2 * width + width, u, r * width, width);
            }
            long dgu = upload(a, gu), dout = cuda.alloc(rows * width * 2L);
            CpuKernels.swiGlu(g, u, rows * width);
            k.swiglu(dgu, dout, rows, width);
            int[] c = compare(g, download(a, dout, rows * width));
            System.out.printf("[cuda] swiglu: %d of %d elements differ from the CPU twin, by at most %d bf16 ulp%n", c[1], g.length, c[0]);
            assertTrue(c[0] <= 1, "swiglu off by " + c[0] + " ulps");
        }
    }

    /**
     * sample against the engine's host rule ({@code Sampler.sample} with the same uniform): the same
     * token, except where the draw lies within 1e-6 (relative) of a boundary of the rule (a cumulative
     * mass, the top-p mass or the min-p floor: the kernel's weights are fp32, the host's double), which
     * the test computes and reports. Logits with many ties (bf16, a few values repeated), vocabularies of
     * 5,000 and 166,912, temperatures 0 / 0.7 / 1.5 with top-k, top-p and min-p on and off. Then
     * batch invariance: each row drawn alone gives the token it got in its group.
     */
    @Test
    void sampleFollowsTheEngineRule() {
        int[] vocabs = {5000, 166912};
        double[] temps = {0, 0.7, 1.5};
        int[] topKs = {0, 1, 7, 50, 2000};
        double[] topPs = {1, 0.9, 0.3};
        double[] minPs = {0, 0.05};
        int cases = 0, same = 0, nearBoundary = 0, combo = 0;
        StringBuilder failures = new StringBuilder();
        for (int vocab : vocabs) {
            java.util.List<float[]> rows = new java.util.ArrayList<>();
            java.util.List<ModelStep.Draw> draws = new java.util.ArrayList<>();
            for (double t : temps) {
                for (int topK : topKs) {
                    for (double topP : topPs) {
                        for (double minP : minPs) {
                            if (vocab > 10_000 && combo++ % 6 != 0) {
                                continue; // the full vocabulary on a sixth of the combinations (the host rule sorts it)
                            }
                            float[] row = randomBf16(vocab, 2.5f);
                            for (int i = 0; i < vocab / 20; i++) {
                                row[rnd.nextInt(vocab)] = row[rnd.nextInt(vocab)]; // ties
                            }
                            row[rnd.nextInt(vocab)] = 9.5f; // a few near-equal leaders
                            row[rnd.nextInt(vocab)] = 9.5f;
                            row[rnd.nextInt(vocab)] = 9.25f;
                            rows.add(row);
                            draws.add(new ModelStep.Draw(t, topK, topP, minP, new double[]{(rnd.nextLong() >>> 11) * 0x1.0p-53}));
                        }
                    }
                }
            }
            int n = rows.size();
            float[] flat = new float[n * vocab];
            for (int r = 0; r < n; r++) {
                System.arraycopy(rows.get(r), 0, flat, r * vocab, vocab);
            }
            try (Arena a = Arena.ofConfined(); DeviceDraws dd = new DeviceDraws(k, vocab, n)) {
                long dl = upload(a, flat);
                int[] got = drawOnDevice(a, dd, dl, draws.toArray(new ModelStep.Draw[0]),
                        draws.stream().mapToDouble(x -> x.u()[0]).toArray());
                for (int r = 0; r < n; r++) {
                    ModelStep.Draw d = draws.get(r);
                    SamplingParams p = new SamplingParams(d.temperature(), d.topK(), d.topP(), d.minP(), null, 0,
                            0, 1, java.util.Map.of(), 1, java.util.Set.of(), true, -1, null, -1);
                    int want = Sampler.sample(rows.get(r), p, new int[vocab], new int[vocab],
                            SamplerTest.fixed(d.u()[0])).token();
                    cases++;
                    if (want == got[r]) {
                        same++;
                    } else if (boundaryDistance(rows.get(r), d) < 1e-6) {
                        nearBoundary++;
                    } else {
                        failures.append(String.format("vocab %d row %d %s: host %d, device %d; ", vocab, r, d, want, got[r]));
                    }
                }
                // batch invariance: every 7th row alone
                for (int r = 0; r < n; r += 7) {
                    ModelStep.Draw[] one = {draws.get(r)};
                    int[] alone = drawOnDevice(a, dd, dl + (long) r * vocab * 2, one, one[0].u());
                    if (alone[0] != got[r]) {
                        failures.append("vocab ").append(vocab).append(" row ").append(r).append(" alone gives ").append(alone[0])
                                .append(", in its group ").append(got[r]).append("; ");
                    }
                }
                cuda.free(dl);
            }
        }
        System.out.printf("[cuda] sample: %d draws, %d equal to the host rule's, %d differ within 1e-6 of a boundary of the rule%n", cases, same,
                nearBoundary);
        assertTrue(failures.isEmpty(), failures.toString());
        assertTrue(nearBoundary * 20 <= cases, "too many boundary cases: " + nearBoundary);
    }

    /** The ids the sample kernel draws for logit rows [0, draws.length) at {@code logits}, as a forward pass draws a step's rows. */
    private int[] drawOnDevice(Arena a, DeviceDraws dd, long logits, ModelStep.Draw[] draws, double[] us) {
        int n = draws.length;
        long ids = cuda.alloc(4L * n);
        try {
            dd.upload(draws, us, n, 0);
            dd.sample(logits, n, 0, 0, ids);
            MemorySegment h = a.allocate(4L * n);
            cuda.copyToHost(h, ids);
            return h.toArray(ValueLayout.JAVA_INT);
        } finally {
            cuda.free(ids);
        }
    }

    /**
     * How close the draw lies to a boundary of the host rule (Sampler's draw, replayed): a token's
     * probability against the min-p floor (relative to the first's), the cumulative top-k mass against
     * top-p, and the cumulative kept mass against u times the kept mass (relative to it).
     */
    static double boundaryDistance(float[] logits, ModelStep.Draw d) {
        if (d.temperature() == 0) {
            return Double.POSITIVE_INFINITY;
        }
        int n = logits.length;
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, (x, y) -> logits[y] != logits[x] ? Float.compare(logits[y], logits[x]) : Integer.compare(x, y));
        int keep = d.topK() > 0 ? Math.min(d.topK(), n) : n;
        double max = logits[order[0]], sum = 0;
        double[] probs = new double[keep];
        for (int i = 0; i < keep; i++) {
            probs[i] = Math.exp((logits[order[i]] - max) / d.temperature());
            sum += probs[i];
        }
        for (int i = 0; i < keep; i++) {
            probs[i] /= sum;
        }
        double dist = Double.POSITIVE_INFINITY;
        if (d.minP() > 0) {
            int k = 1;
            for (int i = 1; i < keep; i++) {
                dist = Math.min(dist, Math.abs(probs[i] / probs[0] - d.minP()));
            }
            while (k < keep && probs[k] >= probs[0] * d.minP()) {
                k++;
            }
            keep = k;
        }
        if (d.topP() < 1) {
            double cum = 0;
            int k = 0;
            while (k < keep) {
                cum += probs[k++];
                dist = Math.min(dist, Math.abs(cum - d.topP()));
                if (cum >= d.topP()) {
                    break;
                }
            }
            keep = k;
        }
        double total = 0;
        for (int i = 0; i < keep; i++) {
            total += probs[i];
        }
        double cum = 0;
        for (int i = 0; i < keep; i++) {
            cum += probs[i];
            dist = Math.min(dist, Math.abs(cum - d.u()[0] * total) / total);
        }
        return dist;
    }

    @Test
    void argmaxIsExactFirstAmongEquals() {
        // 16-byte loads (vocab % 8 == 0) and element by element (an odd vocab); ties across threads and within one 8-wide chunk
        for (int vocab : new int[]{166912, 1001}) {
            try (Arena a = Arena.ofConfined()) {
                int rows = 3;
                float[] logits = randomBf16(rows * vocab, 4);
                logits[vocab + 77] = 1000f;
                logits[vocab + 999] = 1000f;
                logits[2 * vocab + 8 * 5 + 6] = 1000f;
                logits[2 * vocab + 8 * 5 + 3] = 1000f;
                long dl = upload(a, logits), dout = cuda.alloc(rows * 4L);
                k.argmax(dl, rows, vocab, dout);
                MemorySegment h = a.allocate(rows * 4L);
                cuda.copyToHost(h, dout);
                for (int r = 0; r < rows; r++) {
                    assertEquals(GreedyGenerator.argmax(java.util.Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab)),
                            h.getAtIndex(ValueLayout.JAVA_INT, r), "vocab " + vocab + ", row " + r);
                }
                assertEquals(77, h.getAtIndex(ValueLayout.JAVA_INT, 1));
                assertEquals(43, h.getAtIndex(ValueLayout.JAVA_INT, 2));
            }
        }
    }

    /**
     * DFlash2's greedy selector walk on the device picks exactly CandidateSelector.walk's ids: the 166,912-id vocabulary
     * and a small one, top-k 8 and 32, rank 32 and 256, seven drafted rows; logits drawn from a few values so that
     * ties between ids (kept in id order) and between candidates' scores (the first wins) are common.
     */
    @Test
    void selectorWalkIsTheHostWalk() {
        for (int[] sh : new int[][]{{166912, 8, 32}, {166912, 32, 256}, {4096, 8, 32}, {1000, 32, 1024}}) {
            int vocab = sh[0], topK = sh[1], rank = sh[2], rows = 7, anchor = 17;
            try (Arena a = Arena.ofConfined()) {
                float[] logits = new float[rows * vocab];
                for (int i = 0; i < logits.length; i++) {
                    logits[i] = (rnd.nextInt(40) - 20) * 0.25f; // 40 values: many ids tie
                }
                float[] proj = randomBf16(rows * rank, 1), pred = randomBf16(vocab * rank, 0.5f), succ = randomBf16(vocab * rank, 0.5f);
                for (int i = 0; i < succ.length; i += 3) {
                    succ[i] = 0f; // some candidates' dots tie too
                }
                long dl = upload(a, logits), dp = upload(a, proj), dpred = upload(a, pred), dsucc = upload(a, succ), dout = cuda.alloc(rows * 4L);
                k.draft().selectorWalk(dl, rows, vocab, dp, rank, topK, dpred, dsucc, anchor, dout);
                MemorySegment got = a.allocate(rows * 4L);
                cuda.copyToHost(got, dout);
                float[][] z = new float[rows][];
                for (int r = 0; r < rows; r++) {
                    z[r] = java.util.Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab);
                }
                int[] want = CandidateSelector.walk(z, proj, rank, topK, bf16Host(a, pred), bf16Host(a, succ), anchor, null).tokens();
                assertEquals(java.util.Arrays.toString(want), java.util.Arrays.toString(got.toArray(ValueLayout.JAVA_INT)),
                        "vocab " + vocab + ", top-" + topK + ", rank " + rank);
                // the two-pass form: every row's parts at once (row_topk), then the walk over their candidates
                long parts = cuda.alloc(DraftHeadKernels.topKPartBytes(rows, topK, vocab));
                k.draft().rowTopK(dl, rows, vocab, topK, parts);
                k.draft().selectorWalk(dl, rows, vocab, dp, rank, topK, dpred, dsucc, anchor, dout, 0, 0, 0, 0, parts);
                cuda.copyToHost(got, dout);
                assertEquals(java.util.Arrays.toString(want), java.util.Arrays.toString(got.toArray(ValueLayout.JAVA_INT)),
                        "two passes: vocab " + vocab + ", top-" + topK + ", rank " + rank);
                // a later sequence's rows of a batch's parts (rows 3.. of 7)
                k.draft().selectorWalk(dl + 3L * vocab * 2, rows - 3, vocab, dp + 3L * rank * 2, rank, topK, dpred, dsucc, want[2], dout, 0, 0, 0, 0, parts, rows, 3);
                MemorySegment tail = a.allocate((rows - 3) * 4L);
                cuda.copyToHost(tail, dout);
                assertEquals(java.util.Arrays.toString(java.util.Arrays.copyOfRange(want, 3, rows)), java.util.Arrays.toString(tail.toArray(ValueLayout.JAVA_INT)),
                        "two passes, rows 3..: vocab " + vocab + ", top-" + topK + ", rank " + rank);
                cuda.free(parts);
                System.out.println("[cuda] selector walk, vocab " + vocab + ", top-" + topK + ", rank " + rank + ": the host walk's ids " + java.util.Arrays.toString(want));
                // sampled at the model's temperatures: the host walk's draws from the same uniforms, its q within float rounding
                long du = cuda.alloc(rows * 8L), dq = cuda.alloc(4L * rows * topK), dc = cuda.alloc(4L * rows * topK);
                for (double t : new double[]{0.6, 1.0}) {
                    MemorySegment u = a.allocate(rows * 8L);
                    java.util.SplittableRandom draws = new java.util.SplittableRandom(42);
                    for (int r = 0; r < rows; r++) {
                        u.setAtIndex(ValueLayout.JAVA_DOUBLE, r, draws.nextDouble());
                    }
                    cuda.copyToDevice(du, u);
                    k.draft().selectorWalk(dl, rows, vocab, dp, rank, topK, dpred, dsucc, anchor, dout, du, t, dq, dc);
                    MemorySegment ids = a.allocate(rows * 4L), qs = a.allocate(4L * rows * topK), cs = a.allocate(4L * rows * topK);
                    cuda.copyToHost(ids, dout);
                    cuda.copyToHost(qs, dq);
                    cuda.copyToHost(cs, dc);
                    var params = new SamplingParams(t, 0, 1, 0, null, 0, 0, 1, java.util.Map.of(), 40, java.util.Set.of(), false, 1, null, -1);
                    var host = CandidateSelector.walk(z, proj, rank, topK, bf16Host(a, pred), bf16Host(a, succ), anchor,
                            new DraftHead.Sampling(params, new java.util.SplittableRandom(42)));
                    assertEquals(java.util.Arrays.toString(host.tokens()), java.util.Arrays.toString(ids.toArray(ValueLayout.JAVA_INT)),
                            "sampled at " + t + ": vocab " + vocab + ", top-" + topK + ", rank " + rank);
                    double worst = 0;
                    for (int r = 0; r < rows; r++) {
                        double total = 0;
                        for (int j = 0; j < topK; j++) {
                            int id = cs.getAtIndex(ValueLayout.JAVA_INT, (long) r * topK + j);
                            float q = qs.getAtIndex(ValueLayout.JAVA_FLOAT, (long) r * topK + j);
                            worst = Math.max(worst, Math.abs(q - host.q()[r][id]) / Math.max(host.q()[r][id], 1e-30));
                            total += host.q()[r][id];
                        }
                        assertEquals(1.0, total, 1e-5, "the candidates hold the host walk's whole q");
                    }
                    assertTrue(worst < 1e-6, "q within float rounding of the host walk's: " + worst);
                    System.out.printf("[cuda] sampled selector walk at %.1f, vocab %d, top-%d: the host walk's draws; q within %.1e%n", t, vocab, topK, worst);
                }
                cuda.free(du);
                cuda.free(dq);
                cuda.free(dc);
            }
        }
    }

    MemorySegment bf16Host(Arena arena, float[] bf16Values) {
        MemorySegment h = arena.allocate(bf16Values.length * 2L);
        for (int i = 0; i < bf16Values.length; i++) {
            h.setAtIndex(BF16, i, Bf16.fromFloat(bf16Values[i]));
        }
        return h;
    }

    /**
     * Paged attention (kv_write, then the attention launches the forward pass makes) against a
     * double-precision reference with the kernels' rounding points (attention.cu's flash numerics): s = q.k
     * * scale unrounded, per split (KeySplits) an online softmax over 64-key tiles whose p = exp(s - running max)
     * is rounded to bf16 before it multiplies v, the splits folded in order, out = O / L. Bound per output:
     * 2 bf16 ulps of the reference, plus one bf16 step of the largest normalised |p v| term (a p whose exp
     * lands on the other side of a rounding boundary moves by one ulp: up to 2^-7 of itself, at the bottom of a
     * binade; seen at hd 32, a p of 0.5292969 in fp32, the tie between two bf16 values, rounded up where the
     * exact 0.52929684 rounds down), plus 2^-14 of the sum of |p v| (fp32 accumulation
     * order and the fp32 scores). Head dims 16, 32, 64
     * and 128 with 4, 3, 5 and 7 query heads per KV head (the wgmma prefill, where loaded, must give p0's bits at
     * 64 and 128, and the warp-specialised prefills at 128 on CTAs of 128 MMA rows); a prefill window and decode rows over 2, 3 and 6 splits.
     */
    @Test
    void attentionWithinBoundOfFlashNumerics() {
        int[][] shapes = {{16, 4, 2}, {32, 3, 2}, {64, 5, 2}, {128, 7, 2}};
        StringBuilder failures = new StringBuilder();
        for (int[] sh : shapes) {
            int hd = sh[0], group = sh[1], kvHeads = sh[2], heads = group * kvHeads, qd = heads * hd, kvd = kvHeads * hd, stride = qd + 2 * kvd;
            int bs = 16, ctx = 700;
            try (Arena a = Arena.ofConfined()) {
                float[] rows = randomBf16(ctx * stride, 1);
                long dq = upload(a, rows);
                int blocks = (ctx + bs - 1) / bs;
                int[] table = new int[blocks];
                for (int b = 0; b < blocks; b++) {
                    table[b] = blocks - 1 - b; // not the identity: the table is used
                }
                int[] slotMap = new int[ctx];
                for (int p = 0; p < ctx; p++) {
                    slotMap[p] = table[p / bs] * bs + p % bs;
                }
                long dpool = cuda.alloc((long) blocks * 2 * bs * kvd * 2);
                // the slots past the context hold NaNs: no kernel may let them into a row
                cuda.memset(dpool, (byte) 0xFF, (long) blocks * 2 * bs * kvd * 2);
                long dslot = cuda.alloc(ctx * 4L), dtab = cuda.alloc(blocks * 4L);
                cuda.copyToDevice(dslot, a.allocateFrom(ValueLayout.JAVA_INT, slotMap));
                cuda.copyToDevice(dtab, a.allocateFrom(ValueLayout.JAVA_INT, table));
                k.kvWrite(dq, stride, qd, kvd, hd, dpool, dslot, bs, ctx);
                int window = 200;
                int[] decode = {255, 256, 699};
                int tileRows = AttentionKernels.ATTENTION_TILE / group;
                java.util.List<int[]> desc = new java.util.ArrayList<>();
                int part = 0;
                java.util.List<int[]> cdesc = new java.util.ArrayList<>();
                for (int p : decode) {
                    int splits = KeySplits.count(p + 1);
                    cdesc.add(new int[]{part, splits, p});
                    for (int s = 0; s < splits; s++) {
                        // splits in runs of two per CTA, as the planner groups them, each split's state on its own
                        if (s % 2 == 0) {
                            desc.add(new int[]{p, 1, p, 0, s, Math.min(s + 2, splits), part + s, cdesc.size() - 1});
                        }
                    }
                    part += splits;
                }
                int decodeCtas = desc.size();
                for (int r = 0; r < window; r += tileRows) {
                    desc.add(new int[]{r, Math.min(tileRows, window - r), r, 0, 0, KeySplits.count(r + Math.min(tileRows, window - r)), -1, 0});
                }
                long ddesc = cuda.alloc(desc.size() * 32L), dcd = cuda.alloc(cdesc.size() * 12L);
                cuda.copyToDevice(ddesc, a.allocateFrom(ValueLayout.JAVA_INT, desc.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
                cuda.copyToDevice(dcd, a.allocateFrom(ValueLayout.JAVA_INT, cdesc.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
                long dout = cuda.alloc((long) ctx * qd * 2), partO = cuda.alloc((long) part * heads * hd * 4), partML = cuda.alloc((long) part * heads * 8);
                cuda.memsetZero(dout, (long) ctx * qd * 2);
                float scale = (float) Math.pow(hd, -0.5);
                k.attention(AttentionKernels.DECODE, decodeCtas, dq, stride, dout, dpool, dtab, ddesc, partO, partML, heads, kvHeads, hd, bs, scale);
                k.attentionMerge(decode.length, part / decode.length, partO, partML, dcd, dout, heads, hd);
                if (k.hasAttention(hd, AttentionKernels.PREFILL_WARP_PAIRS)) {
                    k.attention(AttentionKernels.PREFILL_WARP_PAIRS, desc.size() - decodeCtas, dq, stride, dout, dpool, dtab, ddesc + 32L * decodeCtas, partO,
                            partML, heads, kvHeads, hd, bs, scale);
                }
                float[] pairs = download(a, dout, ctx * qd);
                k.attention(AttentionKernels.PREFILL, desc.size() - decodeCtas, dq, stride, dout, dpool, dtab, ddesc + 32L * decodeCtas, partO, partML,
                        heads, kvHeads, hd, bs, scale);
                float[] got = download(a, dout, ctx * qd);
                assertEquals(0, compare(got, pairs)[1], "prefill with warp pairs differs from one warp per row group (head dim " + hd + ")");
                if (k.hasAttention(hd, AttentionKernels.PREFILL_WGMMA)) {
                    k.attention(AttentionKernels.PREFILL_WGMMA, desc.size() - decodeCtas, dq, stride, dout, dpool, dtab, ddesc + 32L * decodeCtas, partO,
                            partML, heads, kvHeads, hd, bs, scale);
                    assertEquals(0, compare(got, download(a, dout, ctx * qd))[1], "the wgmma prefill differs from one warp per row group (head dim " + hd + ")");
                    System.out.println("[cuda] attention hd " + hd + ": the wgmma prefill = one warp per row group, bit for bit");
                }
                // the warp-specialised prefills (sm_90a) on CTAs of 128 MMA rows: the window's rows in both consumer warpgroups
                for (int ws : AttentionKernels.WARP_SPECIALIZED) {
                    if (!k.hasAttention(hd, ws)) {
                        continue;
                    }
                    int wsRows = AttentionKernels.attentionTileRows(ws) / group;
                    java.util.List<int[]> tiles = new java.util.ArrayList<>();
                    for (int r = 0; r < window; r += wsRows) {
                        tiles.add(new int[]{r, Math.min(wsRows, window - r), r, 0, 0, KeySplits.count(r + Math.min(wsRows, window - r)), -1, 0});
                    }
                    long dtiles = cuda.alloc(tiles.size() * 32L);
                    cuda.copyToDevice(dtiles, a.allocateFrom(ValueLayout.JAVA_INT, tiles.stream().flatMapToInt(java.util.Arrays::stream).toArray()));
                    // the window's rows NaN first (the decode rows after it keep the split path's values): a row the kernel
                    // does not write fails the comparison
                    cuda.memset(dout, (byte) 0xFF, (long) window * qd * 2);
                    k.attention(ws, tiles.size(), dq, stride, dout, dpool, dtab, dtiles, partO, partML, heads, kvHeads, hd, bs, scale);
                    assertEquals(0, compare(got, download(a, dout, ctx * qd))[1], "the warp-specialised prefill " + AttentionKernels.ATTENTION_KERNELS.get(ws)
                            + " differs from one warp per row group (head dim " + hd + ")");
                    System.out.println("[cuda] attention hd " + hd + ": the warp-specialised prefill " + AttentionKernels.ATTENTION_KERNELS.get(ws)
                            + " = one warp per row group, bit for bit");
                }
                double worst = 0;
                String where = "";
                int checked = 0;
                java.util.List<Integer> rowsToCheck = new java.util.ArrayList<>();
                for (int r = 0; r < window; r++) {
                    rowsToCheck.add(r);
                }
                for (int p : decode) {
                    rowsToCheck.add(p);
                }
                for (int p : rowsToCheck) {
                    for (int h = 0; h < heads; h++) {
                        double[] pr = flashWeights(rows, stride, qd, hd, h, h / group, p, scale);
                        int g = h / group;
                        for (int d = 0; d < hd; d++) {
                            double o = 0, sumAbs = 0, maxTerm = 0;
                            for (int t = 0; t <= p; t++) {
                                double term = pr[t] * rows[t * stride + qd + kvd + g * hd + d];
                                o += term;
                                sumAbs += Math.abs(term);
                                maxTerm = Math.max(maxTerm, Math.abs(term));
                            }
                            float gv = got[p * qd + h * hd + d];
                            double bound = 2 * Math.scalb(1.0, Math.getExponent((float) Math.max(Math.abs(o), 1e-30)) - 7)
                                    + Math.scalb(maxTerm, -7) + Math.scalb(sumAbs, -14);
                            double ratio = Math.abs(gv - o) / bound;
                            if (ratio > worst) {
                                worst = ratio;
                                where = "row " + p + " head " + h + " dim " + d + ": " + gv + " vs " + o;
                            }
                            checked++;
                        }
                    }
                }
                System.out.printf("[cuda] attention hd %d, %d query heads per KV head: %d outputs, worst |diff| / bound = %.3f (%s)%n",
                        hd, group, checked, worst, where);
                if (worst > 1) {
                    failures.append("hd ").append(hd).append(": ").append(worst).append(" at ").append(where).append("; ");
                }
            }
        }
        assertTrue(failures.isEmpty(), "attention exceeds its bound: " + failures);
    }

    /**
     * The normalised weight of each key 0..p in row p's attention output (head h over KV head g) as the
     * kernels compute it, in double: per split (KeySplits) an online softmax over 64-key tiles, p rounded to bf16
     * against the split's running max, the splits folded to the final max and divided by the final sum.
     */
    static double[] flashWeights(float[] rows, int stride, int qd, int hd, int h, int g, int p, float scale) {
        double[] s = new double[p + 1], w = new double[p + 1], split = new double[p + 1];
        for (int t = 0; t <= p; t++) {
            double exact = 0;
            for (int d = 0; d < hd; d++) {
                exact += (double) rows[p * stride + h * hd + d] * rows[t * stride + qd + g * hd + d];
            }
            s[t] = exact * scale;
        }
        int splits = KeySplits.count(p + 1);
        double[] ms = new double[splits], ls = new double[splits];
        for (int sp = 0; sp < splits; sp++) {
            int s0 = KeySplits.start(sp), s1 = Math.min(KeySplits.start(sp + 1), p + 1);
            double m = Double.NEGATIVE_INFINITY, l = 0;
            for (int t0 = s0; t0 < s1; t0 += 64) {
                int t1 = Math.min(t0 + 64, s1);
                double mn = m;
                for (int t = t0; t < t1; t++) {
                    mn = Math.max(mn, s[t]);
                }
                double alpha = m == Double.NEGATIVE_INFINITY ? 0 : Math.exp(m - mn);
                l *= alpha;
                for (int t = s0; t < t0; t++) {
                    w[t] *= alpha;
                }
                for (int t = t0; t < t1; t++) {
                    double e = Math.exp(s[t] - mn);
                    l += e;
                    w[t] = Bf16.round((float) e);
                }
                m = mn;
            }
            ms[sp] = m;
            ls[sp] = l;
            for (int t = s0; t < s1; t++) {
                split[t] = sp;
            }
        }
        double bigM = Double.NEGATIVE_INFINITY;
        for (double m : ms) {
            bigM = Math.max(bigM, m);
        }
        double bigL = 0;
        for (int sp = 0; sp < splits; sp++) {
            bigL += ls[sp] * Math.exp(ms[sp] - bigM);
        }
        for (int t = 0; t <= p; t++) {
            w[t] *= Math.exp(ms[(int) split[t]] - bigM) / bigL;
        }
        return w;
    }

    /** The pinned cuBLASLt algorithms on the fixtures' small shapes: within the bound, and row-invariant. */
    @Test
    void cublasSmallShapes() {
        CublasLt blas = RequiresGpu.Kernels.cublasLt(k);
        int[][] shapes = {{192, 128}, {640, 128}, {128, 320}, {512, 128}, {128, 128}, {192, 96}, {512, 96}, {96, 256}};
        try (Arena a = Arena.ofConfined()) {
            for (int[] sh : shapes) {
                int nOut = sh[0], kk = sh[1], n = 35;
                float[] x = randomBf16(n * kk, 1), w = randomBf16(nOut * kk, 0.1f);
                float[] want = new float[n * nOut];
                CpuKernels.linear(x, n, kk, bf16Segment(a, w), nOut, want);
                long dx = upload(a, x), dw = upload(a, w), dy = cuda.alloc((long) n * nOut * 2);
                blas.linear(dx, n, kk, dw, nOut, dy);
                float[] got = download(a, dy, n * nOut);
                double worst = worstLinearRatio(x, w, want, got, n, kk, nOut);
                blas.linear(dx, 1, kk, dw, nOut, dy);
                int[] c1 = compare(java.util.Arrays.copyOf(got, nOut), download(a, dy, nOut));
                System.out.printf("[cuda] cublasLt %d x %d: worst |diff| / bound = %.3f; row 0 alone differs in %d outputs%n", nOut, kk, worst, c1[1]);
                assertTrue(worst <= 1, nOut + " x " + kk + " exceeds its bound: " + worst);
                assertEquals(0, c1[1], nOut + " x " + kk + ": one row differs from the same row among 35");
            }
        }
    }
}

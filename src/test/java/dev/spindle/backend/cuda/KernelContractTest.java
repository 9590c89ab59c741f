package dev.spindle.backend.cuda;

import dev.spindle.backend.cpu.CpuKernels;
import dev.spindle.model.Bf16;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Optional;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Each CUDA kernel against its CPU twin (the reference backend's kernel), on random
 * inputs of real shapes: exact where the math allows (embed, rope, residual_add), within
 * one bf16 ulp per element where only the reduction order (rms_norm) or expf (swiglu)
 * differ. Runs where a GPU and the compiled kernels are; skipped elsewhere, saying why.
 */
@Tag("gpu")
class KernelContractTest {
    static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static CudaKernels k;
    static CudaDriver cuda;
    final Random rnd = new Random(1);

    @BeforeAll
    static void gpu() {
        Optional<CudaKernels> kernels = CudaKernels.load();
        assumeTrue(kernels.isPresent(), CudaDriver.get().isEmpty() ? "no CUDA driver or GPU on this machine"
                : "this build has no CUDA kernels (nvcc was not on the PATH)");
        k = kernels.get();
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

    @Test
    void ropeIsExact() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 9, heads = 8 + 2, hd = 128, half = hd / 2, positions = 50, stride = (8 + 2 * 2) * hd;
            float[] x = randomBf16(rows * stride, 1);
            float[] cosT = new float[positions * half], sinT = new float[positions * half];
            for (int i = 0; i < cosT.length; i++) {
                double ang = rnd.nextDouble() * 100;
                cosT[i] = Bf16.round((float) Math.cos(ang));
                sinT[i] = Bf16.round((float) Math.sin(ang));
            }
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
        Optional<CublasLt> blas = CublasLt.open();
        assumeTrue(blas.isPresent(), "libcublas.so.13 is not on the loader path");
        try (Arena a = Arena.ofConfined()) {
            int n = 7, k = 2560, nOut = 1024;
            float[] x = randomBf16(n * k, 1), w = randomBf16(nOut * k, 0.02f);
            float[] want = new float[n * nOut];
            CpuKernels.linear(x, n, k, bf16Segment(a, w), nOut, want);
            long dx = upload(a, x), dw = upload(a, w), dy = cuda.alloc(n * nOut * 2L);
            blas.get().linear(dx, n, k, dw, nOut, dy);
            float[] got = download(a, dy, n * nOut);
            int[] c = compare(want, got);
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
            System.out.printf("[cuda] cublas linear (7 x 2560 x 1024): %d of %d outputs differ from the CPU twin; worst |diff| / bound = %.3f%n",
                    c[1], n * nOut, worst);
            assertTrue(worst <= 1, "cuBLAS linear exceeds its bound: " + worst);
            // the pinned algorithm: a row's bits do not depend on how many rows share the call
            int big = 300;
            float[] xs = randomBf16(big * k, 1);
            long dxs = upload(a, xs), dys = cuda.alloc((long) big * nOut * 2);
            blas.get().linear(dxs, big, k, dw, nOut, dys);
            float[] all = download(a, dys, big * nOut);
            for (int rows : new int[]{1, 7, 64, 129}) {
                blas.get().linear(dxs, rows, k, dw, nOut, dys);
                float[] part = download(a, dys, rows * nOut);
                assertEquals(0, compare(java.util.Arrays.copyOf(all, rows * nOut), part)[1], rows + " rows differ from the same rows among " + big);
            }
            blas.get().choices().forEach(line -> System.out.println("[cuda] cublasLt pinned " + line));
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

    @Test
    void argmaxIsExactFirstAmongEquals() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 3, vocab = 166912;
            float[] logits = randomBf16(rows * vocab, 4);
            logits[vocab + 77] = 1000f;
            logits[vocab + 99999] = 1000f;
            long dl = upload(a, logits), dout = cuda.alloc(rows * 4L);
            k.argmax(dl, rows, vocab, dout);
            MemorySegment h = a.allocate(rows * 4L);
            cuda.copyToHost(h, dout);
            for (int r = 0; r < rows; r++) {
                assertEquals(dev.spindle.engine.GreedyGenerator.argmax(java.util.Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab)),
                        h.getAtIndex(ValueLayout.JAVA_INT, r), "row " + r);
            }
        }
    }
}

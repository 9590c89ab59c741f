package dev.spindle.backend.cuda;

import dev.spindle.backend.cpu.CpuKernels;
import dev.spindle.model.Bf16;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * linear_rows (the few-rows linear layer) against cuBLASLt's pinned algorithms: the same bits,
 * every output, at every row count it takes, on shapes from tiny (outputs and k not multiples of
 * the tiles) to the 33B model's, with inputs whose magnitudes span many binades (where the tensor
 * cores' alignment of the products shows). Then against the CPU linear layer within the bound of
 * {@link KernelContractTest#cublasLinearWithinBoundAndBatchInvariant}, and {@link Linear}'s choice.
 */
@RequiresGpu
class LinearRowsContractTest {
    static CudaKernels k;
    static CudaDriver cuda;
    static CublasLt blas;
    final Random rnd = new Random(7);

    @BeforeAll
    static void gpu() {
        k = RequiresGpu.Kernels.load();
        cuda = k.driver();
        blas = RequiresGpu.Kernels.cublasLt(k);
    }

    /** Gaussian values scaled by 2^e, e uniform in [-spread, spread], rounded to bf16. */
    float[] wide(int n, float scale, int spread) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = Bf16.round((float) (rnd.nextGaussian() * scale * Math.scalb(1.0, rnd.nextInt(2 * spread + 1) - spread)));
        }
        return a;
    }

    long upload(Arena arena, float[] v) {
        MemorySegment h = KernelContractTest.bf16Segment(arena, v);
        long d = cuda.alloc(h.byteSize());
        cuda.copyToDevice(d, h);
        return d;
    }

    /** linear_rows variant v on device x (xRows rows of k) and W, through tensor maps made for the call. */
    static void run(LinearRowsVariant v, long x, int xRows, int n, int kk, long w, int nOut, long y) {
        long mx = TensorMaps.bf16(cuda, x, xRows, kk, kk, v.rows(), 64), mw = TensorMaps.bf16(cuda, w, nOut, kk, kk, v.weightRows(), 64);
        k.linearRows(v, mx, n, kk, mw, nOut, y);
        cuda.sync();
        cuda.free(mx);
        cuda.free(mw);
    }

    MemorySegment bits(Arena arena, long d, long elements) {
        MemorySegment h = arena.allocate(elements * 2);
        cuda.copyToHost(h, d);
        return h;
    }

    @Test
    void sameBitsAsCublasLt() {
        int[][] shapes = {{64, 256}, {100, 512}, {3584, 2560}, {2560, 10496}, {9216, 7168}, {7168, 22016}};
        java.util.List<LinearRowsVariant> variants = k.linearRowsVariants();
        assumeTrue(!variants.isEmpty(), "no linear_rows variant fits this device's shared memory");
        int max = 64;
        try (Arena a = Arena.ofConfined()) {
            for (int[] s : shapes) {
                int nOut = s[0], kk = s[1];
                for (int spread : new int[]{0, 12}) {
                    float[] x = wide(max * kk, 1, spread), w = wide(nOut * kk, 0.05f, spread);
                    long dx = upload(a, x), dw = upload(a, w), y1 = cuda.alloc((long) max * nOut * 2), y2 = cuda.alloc((long) max * nOut * 2);
                    for (int n : new int[]{1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 48, 64}) {
                        blas.linear(dx, n, kk, dw, nOut, y1);
                        MemorySegment want = bits(a, y1, (long) n * nOut);
                        for (LinearRowsVariant v : variants) {
                            if (n > v.rows()) {
                                continue;
                            }
                            run(v, dx, max, n, kk, dw, nOut, y2);
                            MemorySegment got = bits(a, y2, (long) n * nOut);
                            long at = want.mismatch(got);
                            assertEquals(-1, at, String.format("%s, %d x %d, %d rows, exponent spread %d: first difference at row %d, output %d"
                                            + " (cuBLASLt %04x, linear_rows %04x)", v, nOut, kk, n, spread, at / 2 / nOut, at / 2 % nOut,
                                    at < 0 ? 0 : want.get(KernelContractTest.BF16, at & ~1L), at < 0 ? 0 : got.get(KernelContractTest.BF16, at & ~1L)));
                        }
                    }
                    System.out.printf("[cuda] linear_rows %d x %d (spread 2^±%d): %d variants give the bits of cuBLASLt at 1 to 64 rows%n", nOut, kk,
                            spread, variants.size());
                    cuda.free(dx);
                    cuda.free(dw);
                    cuda.free(y1);
                    cuda.free(y2);
                }
            }
        }
    }

    /**
     * Every variant computes the same chain, so on any shape they agree with one another bit for bit,
     * whether or not cuBLASLt does (on some odd shapes its pinned algorithms were seen to differ by an ulp).
     */
    @Test
    void variantsAgreeOnOddShapes() {
        java.util.List<LinearRowsVariant> variants = k.linearRowsVariants();
        assumeTrue(!variants.isEmpty(), "no linear_rows variant fits this device's shared memory");
        try (Arena a = Arena.ofConfined()) {
            int nOut = 257, kk = 1280;
            long dx = upload(a, wide(64 * kk, 1, 12)), dw = upload(a, wide(nOut * kk, 0.05f, 12)), dy = cuda.alloc(64L * nOut * 2);
            for (int n : new int[]{1, 5, 8, 13, 16, 29, 32, 64}) {
                MemorySegment first = null;
                for (LinearRowsVariant v : variants) {
                    if (n > v.rows()) {
                        continue;
                    }
                    run(v, dx, 64, n, kk, dw, nOut, dy);
                    MemorySegment got = bits(a, dy, (long) n * nOut);
                    if (first == null) {
                        first = got;
                    } else {
                        assertEquals(-1, first.mismatch(got), v + " differs from the other variants at " + n + " rows");
                    }
                }
                blas.linear(dx, n, kk, dw, nOut, dy);
                System.out.printf("[cuda] linear_rows 257 x 1280, %d rows: the variants agree; cuBLASLt %s%n", n,
                        first != null && first.mismatch(bits(a, dy, (long) n * nOut)) == -1 ? "too" : "differs");
            }
            cuda.free(dx);
            cuda.free(dw);
            cuda.free(dy);
        }
    }

    @Test
    void withinTheLinearBoundOfTheCpuTwin() {
        assumeTrue(!k.linearRowsVariants().isEmpty(), "no linear_rows variant fits this device's shared memory");
        try (Arena a = Arena.ofConfined()) {
            int n = 5, kk = 2560, nOut = 1000;
            float[] x = wide(n * kk, 1, 0), w = wide(nOut * kk, 0.02f, 0);
            float[] want = new float[n * nOut];
            CpuKernels.linear(x, n, kk, KernelContractTest.bf16Segment(a, w), nOut, want);
            long dx = upload(a, x), dw = upload(a, w), dy = cuda.alloc((long) n * nOut * 2);
            run(k.linearRowsVariants().getFirst(), dx, n, n, kk, dw, nOut, dy);
            MemorySegment h = bits(a, dy, (long) n * nOut);
            float[] got = new float[n * nOut];
            for (int i = 0; i < got.length; i++) {
                got[i] = Bf16.toFloat(h.getAtIndex(KernelContractTest.BF16, i));
            }
            double worst = KernelContractTest.worstLinearRatio(x, w, want, got, n, kk, nOut);
            System.out.printf("[cuda] linear_rows (5 x 2560 x 1000): worst |diff| / bound against the CPU twin = %.3f%n", worst);
            assertTrue(worst <= 1, "linear_rows exceeds the linear bound: " + worst);
        }
    }

    @Test
    void linearChecksEveryVariant() {
        try (Arena a = Arena.ofConfined()) {
            int kk = 7168, nOut = 9216;
            long dw = upload(a, wide(nOut * kk, 0.05f, 0));
            Linear linear = new Linear(k, blas);
            linear.prepare(kk, dw, nOut);
            linear.choices().forEach(line -> System.out.println("[cuda] linear " + line));
            String want = nOut + " x " + kk + ": linear_rows variants with cuBLASLt's bits: " + k.linearRowsVariants().size() + " of "
                    + k.linearRowsVariants().size() + ";";
            assertTrue(linear.choices().stream().anyMatch(l -> l.startsWith(want)), "every variant gives cuBLASLt's bits here: " + linear.choices());
            cuda.free(dw);
        }
    }
}

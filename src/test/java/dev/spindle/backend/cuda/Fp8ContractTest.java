package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.Fp8Quantizer;
import dev.spindle.model.Tensor;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The fp8 weight kernels (fp8.cu, linear_rows' fp8 twins) against their references: the device quantizer gives the host
 * quantizer's codes and scales bit for bit; the expansion gives the CPU reference's bf16 values bit for bit; every fp8
 * few-row kernel gives the bits of cuBLASLt over the expansion at every row count it takes (so decode rows equal prefill
 * rows, which run the expansion and cuBLASLt); the layer stays within the linear bound of the CPU reference.
 */
@RequiresGpu
class Fp8ContractTest {
    static CudaKernels k;
    static CudaDriver cuda;
    static CublasLt blas;
    final Random rnd = new Random(11);

    @BeforeAll
    static void gpu() {
        k = RequiresGpu.Kernels.load();
        cuda = k.driver();
        blas = RequiresGpu.Kernels.cublasLt(k);
    }

    /** A random bf16 weight whose magnitudes span 2^-spread .. 2^spread around scale (rows of different ranges too). */
    Bf16Matrix weight(Arena a, int rows, int cols, float scale, int spread) {
        MemorySegment m = a.allocate(2L * rows * cols, 64);
        for (int r = 0; r < rows; r++) {
            double rowScale = scale * Math.scalb(1.0, rnd.nextInt(2 * spread + 1) - spread);
            for (int c = 0; c < cols; c++) {
                m.setAtIndex(KernelContractTest.BF16, (long) r * cols + c, Bf16.fromFloat((float) (rnd.nextGaussian() * rowScale)));
            }
        }
        return new Bf16Matrix(new Tensor("w", new long[]{rows, cols}, m));
    }

    long upload(MemorySegment host) {
        long d = cuda.alloc(host.byteSize());
        cuda.copyToDevice(d, host);
        return d;
    }

    MemorySegment download(Arena a, long d, long bytes) {
        MemorySegment h = a.allocate(bytes);
        cuda.copyToHost(h, d);
        return h;
    }

    /** The host quantizer's matrix on the device. */
    DeviceMatrix.Fp8 upload(Fp8Matrix f) {
        return new DeviceMatrix.Fp8(upload(f.data().data()), upload(f.scales().data()), f.rows(), f.cols(), f.blockRows(), f.blockCols());
    }

    void free(DeviceMatrix.Fp8 w) {
        cuda.free(w.data());
        cuda.free(w.scales());
    }

    static final int[][] BLOCKS = {{1, Integer.MAX_VALUE}, {128, 128}, {32, 64}};

    @Test
    void deviceQuantizerGivesTheHostQuantizersBits() {
        try (Arena a = Arena.ofConfined()) {
            for (int[] shape : new int[][]{{300, 512}, {70, 200}, {1024, 2560}}) {
                int rows = shape[0], cols = shape[1];
                Bf16Matrix w = weight(a, rows, cols, 0.03f, 6);
                long src = upload(w.data().data());
                for (int[] b : BLOCKS) {
                    int bc = Math.min(b[1], cols);
                    Fp8Matrix want = Fp8Quantizer.quantize(w, b[0], bc, a);
                    DeviceMatrix.Fp8 got = new DeviceMatrix.Fp8(cuda.alloc((long) rows * cols), cuda.alloc(want.scales().data().byteSize()), rows, cols, b[0], bc);
                    k.fp8().quantize(src, got);
                    cuda.sync();
                    long codes = want.data().data().mismatch(download(a, got.data(), (long) rows * cols));
                    long scales = want.scales().data().mismatch(download(a, got.scales(), want.scales().data().byteSize()));
                    assertEquals(-1, codes, rows + " x " + cols + " in blocks of " + b[0] + " x " + bc + ": codes differ at " + codes);
                    assertEquals(-1, scales, rows + " x " + cols + " in blocks of " + b[0] + " x " + bc + ": scales differ at byte " + scales);
                    free(got);
                }
                cuda.free(src);
                System.out.printf("[cuda] quantize_fp8 %d x %d: the host quantizer's codes and scales in %d block shapes%n", rows, cols, BLOCKS.length);
            }
        }
    }

    @Test
    void expansionGivesTheReferenceValues() {
        try (Arena a = Arena.ofConfined()) {
            int rows = 200, cols = 640;
            Bf16Matrix w = weight(a, rows, cols, 0.02f, 8);
            for (int[] b : BLOCKS) {
                Fp8Matrix f = Fp8Quantizer.quantize(w, b[0], Math.min(b[1], cols), a);
                DeviceMatrix.Fp8 d = upload(f);
                long out = cuda.alloc(2L * rows * cols);
                k.fp8().dequant(d, out);
                cuda.sync();
                MemorySegment got = download(a, out, 2L * rows * cols);
                for (int r = 0; r < rows; r++) {
                    for (int c = 0; c < cols; c++) {
                        short want = Bf16.fromFloat(Bf16.round(Fp8.decode(f.data().data().get(ValueLayout.JAVA_BYTE, (long) r * cols + c)) * f.scale(r, c)));
                        short g = got.getAtIndex(KernelContractTest.BF16, (long) r * cols + c);
                        if (want != g) {
                            throw new AssertionError(String.format("blocks %d x %d: (%d, %d) expands to %04x, the reference to %04x", b[0], b[1], r, c, g, want));
                        }
                    }
                }
                cuda.free(out);
                free(d);
            }
        }
    }

    /**
     * Every fp8 few-row kernel (wgmma twins and mma.sync variants, each on the scale blocks it takes) against cuBLASLt over the
     * expansion, the same bits at 1 to 64 rows, on the models' shapes (100 outputs: a last CTA past nOut).
     */
    @Test
    void fewRowKernelsGiveCublasBitsOverTheExpansion() {
        List<LinearRowsVariant> variants = k.fp8().variants();
        assumeTrue(!variants.isEmpty(), "no fp8 linear_rows variant runs on this device (sm_90a only)");
        int[][] shapes = {{64, 256}, {100, 512}, {3584, 2560}, {2560, 10496}, {9216, 7168}, {7168, 22016}};
        int max = 64;
        try (Arena a = Arena.ofConfined()) {
            for (int[] s : shapes) {
                int nOut = s[0], kk = s[1];
                Bf16Matrix w = weight(a, nOut, kk, 0.05f, 4);
                float[] xs = new float[max * kk];
                for (int i = 0; i < xs.length; i++) {
                    xs[i] = Bf16.round((float) (rnd.nextGaussian() * Math.scalb(1.0, rnd.nextInt(13) - 6)));
                }
                long x = upload(KernelContractTest.bf16Segment(a, xs)), y1 = cuda.alloc((long) max * nOut * 2), y2 = cuda.alloc((long) max * nOut * 2);
                for (int[] b : new int[][]{{128, 128}, {1, kk}}) {
                    DeviceMatrix.Fp8 d = upload(Fp8Quantizer.quantize(w, b[0], b[1], a));
                    long expanded = cuda.alloc(d.expandedBytes());
                    k.fp8().dequant(d, expanded);
                    for (int n : new int[]{1, 2, 7, 8, 9, 16, 17, 32, 33, 64}) {
                        blas.linear(x, n, kk, expanded, nOut, y1);
                        MemorySegment want = download(a, y1, 2L * n * nOut);
                        for (LinearRowsVariant v : k.fp8().variants(d)) {
                            if (n > v.rows() || kk % v.keys() != 0) {
                                continue;
                            }
                            long mx = TensorMaps.bf16(cuda, x, max, kk, kk, v.rows(), 64), mw = v.mma()
                                    ? TensorMaps.u8Swizzled(cuda, d.data(), nOut, kk, kk, v.weightRows(), 64)
                                    : TensorMaps.u8(cuda, d.data(), nOut, kk, kk, v.weightRows(), 64);
                            cuda.memsetZero(y2, 2L * n * nOut);
                            k.fp8().linearRows(v, mx, n, mw, d, y2);
                            cuda.sync();
                            cuda.free(mx);
                            cuda.free(mw);
                            long at = want.mismatch(download(a, y2, 2L * n * nOut));
                            assertEquals(-1, at, String.format("%s, %d x %d, blocks %d x %d, %d rows: first difference at row %d, output %d",
                                    v.fp8Kernel(), nOut, kk, b[0], b[1], n, at / 2 / nOut, at / 2 % nOut));
                        }
                    }
                    cuda.free(expanded);
                    free(d);
                }
                System.out.printf("[cuda] linear_rows fp8 %d x %d: %d variants (%d on mma.sync) give cuBLASLt's bits over the expansion at 1 to 64"
                        + " rows%n", nOut, kk, variants.size(), variants.stream().filter(LinearRowsVariant::mma).count());
                cuda.free(x);
                cuda.free(y1);
                cuda.free(y2);
            }
        }
    }

    /**
     * {@link Linear} over an fp8 weight: prepare() finds every fp8 variant agreeing; at 5 rows (few-row kernel) and at 200
     * (expansion and cuBLASLt) the outputs are within the linear bound of the CPU reference, and row r of the 200 equals row r
     * of the 5.
     */
    @Test
    void linearOverAnFp8WeightMatchesTheCpuReference() {
        try (Arena a = Arena.ofConfined()) {
            int kk = 2560, nOut = 1024, n = 200;
            Bf16Matrix w = weight(a, nOut, kk, 0.02f, 2);
            Fp8Matrix f = Fp8Quantizer.quantize(w, 128, 128, a);
            DeviceMatrix.Fp8 d = upload(f);
            Linear linear = new Linear(k, blas);
            linear.prepare(d);
            linear.weight(d);
            linear.choices().forEach(line -> System.out.println("[cuda] linear " + line));
            if (!k.fp8().variants(d).isEmpty()) {
                String want = "fp8 " + nOut + " x " + kk + ": linear_rows variants with cuBLASLt's bits: " + k.fp8().variants(d).size() + " of "
                        + k.fp8().variants(d).size() + ";";
                assertTrue(linear.choices().stream().anyMatch(l -> l.startsWith(want)), "every fp8 variant gives cuBLASLt's bits: " + linear.choices());
            }
            float[] xs = new float[n * kk];
            for (int i = 0; i < xs.length; i++) {
                xs[i] = Bf16.round((float) rnd.nextGaussian());
            }
            long x = upload(KernelContractTest.bf16Segment(a, xs)), yFew = cuda.alloc(2L * 5 * nOut), yMany = cuda.alloc(2L * n * nOut);
            linear.input(x, n, kk);
            linear.apply(x, 5, d, yFew);
            linear.apply(x, n, d, yMany);
            cuda.sync();
            MemorySegment few = download(a, yFew, 2L * 5 * nOut), many = download(a, yMany, 2L * n * nOut);
            assertEquals(-1, few.mismatch(many.asSlice(0, few.byteSize())), "5 rows alone differ from the same rows among 200");
            float[] expanded = new float[nOut * kk], row = new float[kk];
            for (int j = 0; j < nOut; j++) {
                dev.spindle.backend.cpu.CpuKernels.expandFp8(f, j, row);
                System.arraycopy(row, 0, expanded, j * kk, kk);
            }
            float[] want = new float[n * nOut], got = new float[n * nOut];
            dev.spindle.backend.cpu.CpuKernels.linear(xs, n, kk, KernelContractTest.bf16Segment(a, expanded), nOut, want);
            for (int i = 0; i < got.length; i++) {
                got[i] = Bf16.toFloat(many.getAtIndex(KernelContractTest.BF16, i));
            }
            double worst = KernelContractTest.worstLinearRatio(xs, expanded, want, got, n, kk, nOut);
            System.out.printf("[cuda] fp8 linear (200 x 2560 x 1024, 128x128 blocks): worst |diff| / bound against the CPU reference = %.3f%n", worst);
            assertTrue(worst <= 1, "the fp8 linear layer exceeds the linear bound: " + worst);
            linear.close();
            cuda.free(x);
            cuda.free(yFew);
            cuda.free(yMany);
            free(d);
        }
    }

    /**
     * rope_kv_write_kv8 stores each K and V head vector as the CPU's KV codec encodes the values rope_kv_write stores in bf16:
     * the same E4M3 codes and bf16 scale, at the fp8 pool's place of the record (head dims 64 and 128).
     */
    @Test
    void fp8KvWriteStoresTheCpuCodecsRecords() {
        try (Arena a = Arena.ofConfined()) {
            for (int hd : new int[]{64, 128}) {
                int rows = 5, qHeads = 4, kvHeads = 2, bs = 16, blocks = 2, half = hd / 2, stride = (qHeads + 2 * kvHeads) * hd, positions = 100;
                float[] qkv = new float[rows * stride];
                for (int i = 0; i < qkv.length; i++) {
                    qkv[i] = Bf16.round((float) (rnd.nextGaussian() * Math.scalb(1.0, rnd.nextInt(9) - 4)));
                }
                float[] cos = new float[positions * half], sin = new float[positions * half];
                for (int i = 0; i < cos.length; i++) {
                    double t = rnd.nextDouble() * 6.28;
                    cos[i] = (float) Math.cos(t);
                    sin[i] = (float) Math.sin(t);
                }
                int[] pos = {3, 50, 99, 0, 17}, slots = {1, 16, 7, 30, 2};
                MemorySegment hq = KernelContractTest.bf16Segment(a, qkv);
                long x1 = upload(hq), x2 = upload(hq), dCos = upload(a.allocateFrom(ValueLayout.JAVA_FLOAT, cos)), dSin = upload(a.allocateFrom(ValueLayout.JAVA_FLOAT, sin));
                long dPos = upload(a.allocateFrom(ValueLayout.JAVA_INT, pos)), dSlots = upload(a.allocateFrom(ValueLayout.JAVA_INT, slots));
                long bf16Bytes = 2L * blocks * 2 * kvHeads * bs * hd, fp8Bytes = (long) blocks * 2 * kvHeads * bs * (hd + 2);
                long pool16 = cuda.alloc(bf16Bytes), pool8 = cuda.alloc(fp8Bytes);
                cuda.memsetZero(pool16, bf16Bytes);
                cuda.memsetZero(pool8, fp8Bytes);
                k.ropeKvWrite(x1, stride, dCos, dSin, dPos, rows, qHeads, kvHeads, hd, pool16, dSlots, bs);
                k.fp8().ropeKvWrite(x2, stride, dCos, dSin, dPos, rows, qHeads, kvHeads, hd, pool8, dSlots, bs);
                cuda.sync();
                MemorySegment p16 = download(a, pool16, bf16Bytes), p8 = download(a, pool8, fp8Bytes);
                MemorySegment want = a.allocate(hd + 2);
                float[] v = new float[hd];
                for (int r = 0; r < rows; r++) {
                    int blk = slots[r] / bs, off = slots[r] % bs;
                    for (int isV = 0; isV < 2; isV++) {
                        for (int h = 0; h < kvHeads; h++) {
                            long at16 = ((((long) blk * 2 + isV) * kvHeads + h) * bs + off) * hd;
                            for (int i = 0; i < hd; i++) {
                                v[i] = Bf16.toFloat(p16.getAtIndex(KernelContractTest.BF16, at16 + i));
                            }
                            dev.spindle.backend.KvCodec.encode(dev.spindle.step.KvDtype.FP8, v, 0, hd, want, 0);
                            long block = (long) blk * 2 * kvHeads * bs * (hd + 2), rec = (long) isV * kvHeads * bs + (long) h * bs + off;
                            long codes = p8.asSlice(block + rec * hd, hd).mismatch(want.asSlice(0, hd));
                            assertEquals(-1, codes, "head dim " + hd + ", row " + r + (isV == 1 ? " V" : " K") + " head " + h + ": codes differ at " + codes);
                            short scale = p8.get(KernelContractTest.BF16, block + 2L * kvHeads * bs * hd + 2 * rec);
                            assertEquals(want.get(KernelContractTest.BF16, hd), scale, "head dim " + hd + ", row " + r + " head " + h + ": scale");
                        }
                    }
                }
                for (long d : new long[]{x1, x2, dCos, dSin, dPos, dSlots, pool16, pool8}) {
                    cuda.free(d);
                }
                System.out.printf("[cuda] rope_kv_write_kv8 (head dim %d): the CPU codec's records%n", hd);
            }
        }
    }
}

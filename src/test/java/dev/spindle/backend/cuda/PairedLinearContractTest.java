package dev.spindle.backend.cuda;

import dev.spindle.backend.RotaryTable;
import dev.spindle.model.Bf16;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * linear_rows' paired twins (one launch: the linear layer and SwiGLU, or the linear layer and rope_kv_write) against
 * the two launches they stand in for (the linear layer, then the swiglu or rope_kv_write kernel, each with its own
 * contract test): the same bits in every output and every pool element, at every row count a variant takes, on the
 * shapes of the 3B and 33B models (and a tensor-parallel rank's half of the 33B's MLP), head dims 64 and 128.
 */
@RequiresGpu
class PairedLinearContractTest {
    static CudaKernels k;
    static CudaDriver cuda;
    static CublasLt blas;
    final Random rnd = new Random(11);

    @BeforeAll
    static void gpu() {
        k = RequiresGpu.Kernels.load();
        cuda = k.driver();
        blas = RequiresGpu.Kernels.cublasLt(k);
        assumeTrue(!k.pairedRowsVariants().isEmpty(), "no paired linear_rows variant on this device (sm_90a only)");
    }

    long uploadBf16(Arena a, int n, float scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = Bf16.round((float) (rnd.nextGaussian() * scale));
        }
        MemorySegment h = KernelContractTest.bf16Segment(a, v);
        long d = cuda.alloc(h.byteSize());
        cuda.copyToDevice(d, h);
        return d;
    }

    static long uploadInts(Arena a, int[] v) {
        long d = cuda.alloc(v.length * 4L);
        cuda.copyToDevice(d, a.allocateFrom(ValueLayout.JAVA_INT, v));
        return d;
    }

    static MemorySegment download(Arena a, long d, long bytes) {
        MemorySegment h = a.allocate(bytes);
        cuda.sync();
        cuda.copyToHost(h, d);
        return h;
    }

    /** PairedLinear's own check at start: every paired variant that takes k agrees with the two launches. */
    @ParameterizedTest(name = "{0}: k {1}, {2}")
    @CsvSource({"swiglu, 2560, 10496, 0, 0", "swiglu, 7168, 22016, 0, 0", "swiglu, 7168, 11008, 0, 0", "swiglu, 256, 64, 0, 0",
            "rope, 2560, 20, 4, 128", "rope, 7168, 56, 8, 128", "rope, 3072, 24, 4, 128", "rope, 512, 8, 2, 64"})
    void prepareFindsEveryVariantExact(String kind, int kk, int a, int b, int hd) {
        PairedEpilogue shape = kind.equals("swiglu") ? new PairedEpilogue.Swiglu(a)
                : new PairedEpilogue.RopeKvWrite(0, 0, 0, a, b, hd, 0, 0, 16);
        int nOut = shape.outputs();
        try (Arena arena = Arena.ofConfined()) {
            long w = uploadBf16(arena, nOut * kk, 0.05f);
            Linear linear = new Linear(k, blas);
            linear.prepare(kk, w, nOut);
            PairedLinear paired = new PairedLinear(k, linear);
            paired.prepare(shape, kk, w);
            String line = paired.choices().getLast();
            System.out.println("[cuda] paired " + line);
            long takes = k.pairedRowsVariants().stream().filter(v -> kk % v.keys() == 0).count();
            assertTrue(line.contains("the two launches' bits: " + takes + " of " + k.pairedRowsVariants().size() + ";"), line);
            paired.close();
            linear.close();
            cuda.free(w);
        }
    }

    /**
     * rope_kv_write paired with the 33B's q|k|v and with a head dim 64 layer, at positions up to 512K (the real rotary
     * tables), rows scattered over KV blocks of 16: the qkv rows and the pool equal the two launches' at 1 to 64 rows.
     */
    @Test
    void pairedRopeKvWriteAtLongPositions() {
        int[][] shapes = {{7168, 56, 8, 128}, {512, 8, 2, 64}};
        for (int[] s : shapes) {
            int kk = s[0], qh = s[1], kvh = s[2], hd = s[3], half = hd / 2, nOut = (qh + 2 * kvh) * hd, bs = 16, positions = 1 << 19, max = 64;
            try (Arena a = Arena.ofConfined()) {
                long w = uploadBf16(a, nOut * kk, 0.05f), x = uploadBf16(a, max * kk, 1f);
                float[] cs = new float[positions * half], sn = new float[positions * half];
                new RotaryTable(hd, 1e7).fill(0, positions, cs, sn);
                long cos = cuda.alloc(cs.length * 4L), sin = cuda.alloc(sn.length * 4L);
                cuda.copyToDevice(cos, a.allocateFrom(ValueLayout.JAVA_FLOAT, cs));
                cuda.copyToDevice(sin, a.allocateFrom(ValueLayout.JAVA_FLOAT, sn));
                int blocks = 16;
                int[] pos = new int[max], slots = new int[max];
                // distinct slots (two rows writing one slot would race) scattered over the blocks
                List<Integer> free = new java.util.ArrayList<>(java.util.stream.IntStream.range(0, blocks * bs).boxed().toList());
                java.util.Collections.shuffle(free, rnd);
                for (int r = 0; r < max; r++) {
                    pos[r] = r < 4 ? positions - 1 - r : rnd.nextInt(positions);
                    slots[r] = free.get(r);
                }
                long dp = uploadInts(a, pos), ds = uploadInts(a, slots);
                long poolBytes = (long) blocks * 2 * bs * kvh * hd * 2, outBytes = (long) max * nOut * 2;
                long pool1 = cuda.alloc(poolBytes), pool2 = cuda.alloc(poolBytes), y1 = cuda.alloc(outBytes), y2 = cuda.alloc(outBytes);
                PairedEpilogue.RopeKvWrite e2 = new PairedEpilogue.RopeKvWrite(cos, sin, dp, qh, kvh, hd, pool2, ds, bs);
                long mw = TensorMaps.bf16(cuda, w, nOut, kk, kk, 32, 64);
                List<LinearRowsVariant> variants = k.pairedRowsVariants().stream().filter(v -> kk % v.keys() == 0).toList();
                int checked = 0;
                for (int n : new int[]{1, 2, 5, 8, 13, 16, 31, 32, 47, 64}) {
                    cuda.memsetZero(pool1, poolBytes);
                    cuda.memsetZero(y1, outBytes);
                    blas.linear(x, n, kk, w, nOut, y1);
                    k.ropeKvWrite(y1, nOut, cos, sin, dp, n, qh, kvh, hd, pool1, ds, bs);
                    MemorySegment wantY = download(a, y1, (long) n * nOut * 2), wantPool = download(a, pool1, poolBytes);
                    for (LinearRowsVariant v : variants) {
                        if (n > v.rows()) {
                            continue;
                        }
                        long mx = TensorMaps.bf16(cuda, x, max, kk, kk, v.rows(), 64);
                        cuda.memsetZero(pool2, poolBytes);
                        cuda.memsetZero(y2, outBytes);
                        k.linearRowsPaired(v, mx, n, kk, mw, nOut, y2, e2);
                        long atY = wantY.mismatch(download(a, y2, (long) n * nOut * 2)), atPool = wantPool.mismatch(download(a, pool2, poolBytes));
                        cuda.free(mx);
                        assertEquals(-1, atY, String.format("paired %s (%d rows), %d x %d, %d rows: qkv differs at row %d, output %d", v.label(), v.rows(), nOut, kk, n,
                                atY / 2 / nOut, atY / 2 % nOut));
                        assertEquals(-1, atPool, String.format("paired %s (%d rows), %d x %d, %d rows: the pool differs at element %d", v.label(), v.rows(), nOut, kk, n,
                                atPool / 2));
                        checked++;
                    }
                }
                System.out.printf("[cuda] paired rope_kv_write %d x %d (head dim %d, positions to %d): %d variant x row counts equal the two launches%n",
                        nOut, kk, hd, positions, checked);
                cuda.free(mw);
                for (long p : new long[]{w, x, cos, sin, dp, ds, pool1, pool2, y1, y2}) {
                    cuda.free(p);
                }
            }
        }
    }
}

package dev.spindle.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** What the bench measures of cuBLASLt beside the GEMMs the passes pin: the device's bf16 peak and fixed splits of K. */
public final class CublasProbes {
    private CublasProbes() {
    }

    /**
     * The bench's {@code gemm_split_k}: what splitting K in a fixed number of parts would give a k x nOut weight. A split-free
     * algorithm's outputs are each one fp32 chain of k / 16 dependent MMAs, which bounds a narrow weight's few-row GEMM
     * (the 3B's down projection: its chain takes longer than its bytes' copy); a fixed split walks shorter chains at once and
     * sums them. Here the search's candidates ({@link CublasLt#candidates}) are run with {@code splits} parts and each
     * reduction scheme (1 in place, 2 in the compute type, 4 in the output type), kept where cuBLASLt accepts them at 1 to
     * {@code rows} rows within the workspace, one row alone gets the bits it gets among {@value CublasLt#PROBE} and a second run
     * the same bits; each kind's best 1-row and {@code rows}-row times against the split-free best's. Nothing is pinned.
     */
    public static List<Map<String, Object>> splitK(CublasLt lt, int k, int nOut, int rows, int[] splitCounts) {
        List<MemorySegment> found = lt.candidates(k, nOut);
        int[] checkRows = {1, 7, CublasLt.PROBE, rows};
        long x = lt.cuda.alloc((long) rows * k * 2), y = lt.cuda.alloc((long) rows * nOut * lt.outBytes), w = lt.cuda.alloc((long) nOut * k * 2);
        lt.fill.random(x, (long) rows * k, 11);
        lt.fill.random(w, (long) nOut * k, 13);
        FunctionDescriptor set = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG);
        List<Map<String, Object>> out = new ArrayList<>();
        try (Arena host = Arena.ofConfined()) {
            MemorySegment probe = host.allocate((long) CublasLt.PROBE * nOut * lt.outBytes), again = host.allocate(probe.byteSize()),
                    one = host.allocate((long) nOut * lt.outBytes);
            for (int splits : splitCounts) {
                for (int reduction : splits == 1 ? new int[]{0} : new int[]{1, 2, 4}) {
                    Map<String, MemorySegment> unique = new LinkedHashMap<>();
                    for (MemorySegment f : found) {
                        MemorySegment algo = lt.arena.allocate(64, 8).copyFrom(f);
                        if (lt.rawCall("cublasLtMatmulAlgoConfigSetAttribute", set, algo, CublasLt.CONFIG_SPLITK, lt.arena.allocateFrom(JAVA_INT, splits), 4L) == 0
                                && lt.rawCall("cublasLtMatmulAlgoConfigSetAttribute", set, algo, CublasLt.CONFIG_REDUCTION, lt.arena.allocateFrom(JAVA_INT, reduction), 4L) == 0
                                && lt.supported(algo, k, nOut, checkRows)) {
                            unique.putIfAbsent(CublasLt.key(algo), algo);
                        }
                    }
                    int invariant = 0;
                    Set<Long> groups = new HashSet<>();
                    double best1 = Double.MAX_VALUE, bestRows = Double.MAX_VALUE;
                    for (MemorySegment algo : unique.values()) {
                        if (!lt.rowInvariant(algo, x, k, w, nOut, y, probe, one)) {
                            continue;
                        }
                        lt.run(x, CublasLt.PROBE, k, w, nOut, y, algo);
                        lt.cuda.copyToHost(again, y);
                        if (again.mismatch(probe) != -1) {
                            continue; // not the same bits twice
                        }
                        invariant++;
                        groups.add(CublasLt.hash(probe));
                        best1 = Math.min(best1, lt.cuda.time(() -> { for (int i = 0; i < 5; i++) lt.run(x, 1, k, w, nOut, y, algo); }) / 5);
                        lt.run(x, rows, k, w, nOut, y, algo);
                        bestRows = Math.min(bestRows, lt.cuda.time(() -> { for (int i = 0; i < 2; i++) lt.run(x, rows, k, w, nOut, y, algo); }) / 2);
                    }
                    Map<String, Object> r = new LinkedHashMap<>();
                    r.put("shape", nOut + " x " + k);
                    r.put("splits", splits);
                    r.put("reduction", reduction);
                    r.put("candidates", unique.size());
                    r.put("row_invariant_and_repeatable", invariant);
                    r.put("bit_groups", groups.size());
                    if (invariant > 0) {
                        r.put("best_1_row_us", Math.round(best1 * 1e7) / 10.0);
                        r.put("best_" + rows + "_rows_us", Math.round(bestRows * 1e7) / 10.0);
                    }
                    out.add(r);
                }
            }
            return out;
        } finally {
            lt.cuda.sync();
            lt.cuda.free(x);
            lt.cuda.free(y);
            lt.cuda.free(w);
        }
    }

    /**
     * The bf16 GEMM peak of this device in TFLOP/s, measured with cuBLASLt's first choice
     * (split-K allowed) on size x size x size constant-valued matrices.
     */
    public static double peakTflops(CublasLt lt, int size) {
        if (lt.f32Out) {
            throw new IllegalStateException("the GEMM peak is measured with bf16 outputs");
        }
        long bytes = (long) size * size * 2;
        long a = lt.cuda.alloc(bytes), b = lt.cuda.alloc(bytes), c = lt.cuda.alloc(bytes);
        try {
            lt.cuda.memsetZero(a, bytes);
            lt.cuda.memsetZero(b, bytes);
            MemorySegment algo = lt.heuristics(size, size, size, 1).getFirst();
            lt.run(a, size, size, b, size, c, algo);
            int reps = 10;
            double s = lt.cuda.time(() -> { for (int i = 0; i < reps; i++) lt.run(a, size, size, b, size, c, algo); });
            return 2.0 * size * size * (double) size * reps / s / 1e12;
        } finally {
            lt.cuda.free(a);
            lt.cuda.free(b);
            lt.cuda.free(c);
        }
    }
}

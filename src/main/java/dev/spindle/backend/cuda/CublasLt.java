package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * cuBLASLt through FFM, on the driver's context and stream: the bf16 linear layer
 * {@code y = bf16(x @ W^T)}, fp32 accumulation, with one <b>pinned algorithm per weight
 * shape</b> used for every row count. The algorithm is split-free (one CTA walks each output's
 * whole K in its tile's fixed order), so a row's result does not depend on how many rows share
 * the call: the batch invariance the engine's tests demand. Per shape, a fast one-row algorithm
 * and a fast many-row one are pinned that give the same bits (see {@link #choose}).
 */
public final class CublasLt {
    static final int LARGE = 4096, PROBE = 64;
    private static final java.lang.foreign.ValueLayout.OfLong JAVA_LONG_UNALIGNED = JAVA_LONG.withByteAlignment(1);

    /** Fills device memory with random bf16 values (the engine's fill_dummy kernel). */
    @FunctionalInterface
    public interface RandomFill {
        void random(long ptr, long elements, long seed);
    }
    private static final int OP_N = 0, OP_T = 1, R_16BF = 14, R_32F = 0, COMPUTE_32F = 68;
    private static final int DESC_TRANSA = 3, DESC_TRANSB = 4, PREF_MAX_WORKSPACE = 1;
    static final int CONFIG_TILE = 1, CONFIG_SPLITK = 2, CONFIG_REDUCTION = 3, CONFIG_STAGES = 6;
    private static final long HEURISTIC_BYTES = 96, WORKSPACE = 32L << 20;

    final CudaDriver cuda;
    private final NativeLibrary lib;
    private final Map<String, MethodHandle> handles = new HashMap<>();
    private final MethodHandle matmul;
    final Arena arena = Arena.ofShared();
    private final MemorySegment handle, desc, pref, alpha, beta;
    private final long workspace;
    private final Map<Long, MemorySegment[]> layouts = new HashMap<>();
    private final Map<Long, Pinned> pinned = new HashMap<>();
    final RandomFill fill;
    private final List<String> choices = new ArrayList<>();
    private static final System.Logger LOG = System.getLogger("dev.spindle.cuda");
    private GemmAlgorithmCache cache;

    /** Whether y is fp32 (the GEMM's accumulators, unrounded) rather than bf16. */
    final boolean f32Out;
    /** Bytes of one output element: 2 (bf16) or 4 (fp32). */
    final int outBytes;

    private CublasLt(CudaDriver cuda, NativeLibrary lib, RandomFill fill, boolean f32Out) {
        this.cuda = cuda;
        this.f32Out = f32Out;
        this.outBytes = f32Out ? 4 : 2;
        this.fill = fill;
        this.lib = lib;
        matmul = lib.function("cublasLtMatmul", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS,
                JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
        MemorySegment out = arena.allocate(ADDRESS);
        call("cublasLtCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS), out);
        handle = out.get(ADDRESS, 0);
        call("cublasLtMatmulDescCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), out, COMPUTE_32F, R_32F);
        desc = out.get(ADDRESS, 0);
        FunctionDescriptor setAttr = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG);
        call("cublasLtMatmulDescSetAttribute", setAttr, desc, DESC_TRANSA, arena.allocateFrom(JAVA_INT, OP_T), 4L);
        call("cublasLtMatmulDescSetAttribute", setAttr, desc, DESC_TRANSB, arena.allocateFrom(JAVA_INT, OP_N), 4L);
        call("cublasLtMatmulPreferenceCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS), out);
        pref = out.get(ADDRESS, 0);
        call("cublasLtMatmulPreferenceSetAttribute", setAttr, pref, PREF_MAX_WORKSPACE, arena.allocateFrom(JAVA_LONG, WORKSPACE), 8L);
        alpha = arena.allocateFrom(JAVA_FLOAT, 1f);
        beta = arena.allocateFrom(JAVA_FLOAT, 0f);
        workspace = cuda.alloc(WORKSPACE);
    }

    /** cuBLASLt on the current CUDA context, if the library can be found (libcublasLt.so.13 on the loader path). */
    /** Whether the library can be found here. */
    public static boolean available() {
        return NativeLibrary.open(List.of("libcublasLt.so.13", "libcublasLt.so", "cublasLt64_13.dll")).isPresent();
    }

    public static Optional<CublasLt> open(CudaKernels kernels) {
        return open(kernels, false);
    }

    /**
     * cuBLASLt on the kernels' device and stream; with {@code f32Out} every {@link #linear} writes fp32 outputs (each
     * output's fp32 accumulator, not rounded: a tensor-parallel rank's partial), its algorithms pinned by the same rules
     * and cached apart from the bf16 ones.
     */
    public static Optional<CublasLt> open(CudaKernels kernels, boolean f32Out) {
        RandomFill fill = (p, n, seed) -> kernels.fillDummy(p, n, seed, 0f, 1f);
        return NativeLibrary.open(List.of("libcublasLt.so.13", "libcublasLt.so", "cublasLt64_13.dll"))
                .map(l -> new CublasLt(kernels.driver(), l, fill, f32Out));
    }

    private int call(String name, FunctionDescriptor fd, Object... args) {
        int status = rawCall(name, fd, args);
        if (status != 0) {
            throw new CudaException(name + " failed: cuBLAS status " + status);
        }
        return status;
    }

    int rawCall(String name, FunctionDescriptor fd, Object... args) {
        try {
            return (int) handles.computeIfAbsent(name, n -> lib.function(n, fd)).invokeWithArguments(args);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException(name + ": " + t);
        }
    }

    /** Layouts of W (as k x nOut column-major), x (k x n) and y (nOut x n), bf16, cached per shape. */
    private MemorySegment[] layouts(int n, int k, int nOut) {
        long key = ((long) n << 40) ^ ((long) k << 20) ^ nOut;
        return layouts.computeIfAbsent(key, x -> {
            FunctionDescriptor fd = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
            MemorySegment[] l = new MemorySegment[3];
            long[][] dims = {{k, nOut, k}, {k, n, k}, {nOut, n, nOut}};
            for (int i = 0; i < 3; i++) {
                MemorySegment out = arena.allocate(ADDRESS);
                call("cublasLtMatrixLayoutCreate", fd, out, i == 2 && f32Out ? R_32F : R_16BF, dims[i][0], dims[i][1], dims[i][2]);
                l[i] = out.get(ADDRESS, 0);
            }
            return l;
        });
    }

    /**
     * y (n, nOut) = bf16(x (n, k) @ W^T), W (nOut, k): row-major bf16 device arrays; in stream order. On an fp32-output
     * instance ({@link #open(CudaKernels, boolean)}) y is fp32 and not rounded.
     */
    public void linear(long x, int n, int k, long w, int nOut, long y) {
        Pinned p = pinned.get(((long) k << 32) | nOut);
        if (p == null) {
            p = pin(k, nOut);
            pinned.put(((long) k << 32) | nOut, p);
        }
        run(x, n, k, w, nOut, y, p.forRows(n));
    }

    /**
     * Keeps the pinned algorithms in {@code dir} (see {@link GemmAlgorithmCache}): shapes found there
     * (and passing the checks) are not searched again, new choices are added. Call before the first
     * {@link #linear}.
     */
    public void useCache(java.nio.file.Path dir) {
        int[] cc = cuda.computeCapability();
        long version;
        try {
            version = (long) lib.function("cublasLtGetVersion", FunctionDescriptor.of(JAVA_LONG)).invokeExact();
        } catch (Throwable t) {
            throw new CudaException("cublasLtGetVersion: " + t);
        }
        cache = GemmAlgorithmCache.open(dir, cuda.deviceName() + (f32Out ? " fp32-out" : ""), cc[0], cc[1], version);
        cache.problems().forEach(p -> LOG.log(System.Logger.Level.WARNING, p));
    }

    /** The algorithms of a shape: from the cache when its entry passes the checks, else searched (and cached). */
    private Pinned pin(int k, int nOut) {
        long t0 = System.nanoTime();
        Pinned p = pinUntimed(k, nOut);
        int last = choices.size() - 1;
        choices.set(last, choices.get(last) + String.format(java.util.Locale.ROOT, " (%.2f s)", (System.nanoTime() - t0) / 1e9));
        return p;
    }

    private Pinned pinUntimed(int k, int nOut) {
        if (cache != null) {
            java.util.Optional<List<byte[]>> stored = cache.get(k, nOut);
            if (stored.isPresent()) {
                String why = checkCached(stored.get(), k, nOut);
                if (why == null) {
                    MemorySegment[] algos = stored.get().stream().map(b -> arena.allocate(64, 8).copyFrom(MemorySegment.ofArray(b)))
                            .toArray(MemorySegment[]::new);
                    choices.add(String.format("%d x %d: the cached algorithms of %s (checked: supported, row-invariant, one bit-identical group)",
                            nOut, k, cache.file()));
                    return new Pinned(algos);
                }
                LOG.log(System.Logger.Level.WARNING, cache.file() + ": the algorithms stored for " + nOut + " x " + k + " are not used ("
                        + why + "); searching again");
                cache.forget(k, nOut);
            }
        }
        Pinned p = choose(k, nOut);
        if (cache != null) {
            cache.put(k, nOut, java.util.Arrays.stream(p.algos()).map(a -> a.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)).toList());
            cache.problems().forEach(msg -> LOG.log(System.Logger.Level.WARNING, msg));
        }
        return p;
    }

    /**
     * Why stored algorithms cannot be used for a k x nOut weight, or null when they can: one per row
     * bucket, each accepted by cuBLASLt at 1 to {@value #LARGE} rows, giving one row alone the bits it
     * gives among {@value #PROBE}, and all giving the same bits.
     */
    private String checkCached(List<byte[]> stored, int k, int nOut) {
        if (stored.size() != BUCKETS.length) {
            return stored.size() + " algorithms, expected one per row bucket (" + BUCKETS.length + ")";
        }
        Map<String, MemorySegment> distinct = new java.util.LinkedHashMap<>();
        for (byte[] b : stored) {
            MemorySegment algo = arena.allocate(64, 8).copyFrom(MemorySegment.ofArray(b));
            if (!supported(algo, k, nOut)) {
                return "cuBLASLt does not accept algorithm " + key(algo) + " here";
            }
            distinct.putIfAbsent(key(algo), algo);
        }
        long x = cuda.alloc((long) PROBE * k * 2), y = cuda.alloc((long) PROBE * nOut * outBytes), w = cuda.alloc((long) nOut * k * 2);
        fill.random(x, (long) PROBE * k, 11);
        fill.random(w, (long) nOut * k, 13);
        try (Arena host = Arena.ofConfined()) {
            MemorySegment first = null, probe = host.allocate((long) PROBE * nOut * outBytes), one = host.allocate((long) nOut * outBytes);
            for (MemorySegment algo : distinct.values()) {
                if (!rowInvariant(algo, x, k, w, nOut, y, probe, one)) {
                    return "algorithm " + key(algo) + " gives one row other bits than it gives among " + PROBE;
                }
                if (first == null) {
                    first = host.allocate(probe.byteSize()).copyFrom(probe);
                } else if (first.mismatch(probe) != -1) {
                    return "the stored algorithms give different bits";
                }
            }
            return null;
        } finally {
            cuda.sync();
            cuda.free(x);
            cuda.free(y);
            cuda.free(w);
        }
    }

    void run(long x, int n, int k, long w, int nOut, long y, MemorySegment algo) {
        MemorySegment[] l = layouts(n, k, nOut);
        int status;
        try {
            status = (int) matmul.invokeExact(handle, desc, alpha, w, l[0], x, l[1], beta, y, l[2], y, l[2], algo, workspace, WORKSPACE,
                    cuda.stream());
        } catch (Throwable t) {
            throw new CudaException("cublasLtMatmul: " + t);
        }
        if (status != 0) {
            throw new CudaException("cublasLtMatmul (" + n + " x " + k + " x " + nOut + ") failed: cuBLAS status " + status);
        }
    }

    /** The algorithms a weight shape's search starts from: cuBLASLt's own ranking at {@value #LARGE} rows and at 1 to 1,024. */
    List<MemorySegment> candidates(int k, int nOut) {
        List<MemorySegment> found = new ArrayList<>(heuristics(LARGE, k, nOut, 16));
        for (int n : new int[]{1, 16, 64, 256, 1024}) {
            found.addAll(heuristics(n, k, nOut, 8));
        }
        return found;
    }

    /** cuBLASLt's own ranked algorithms for this problem (split-K allowed), up to {@code count}. */
    List<MemorySegment> heuristics(int n, int k, int nOut, int count) {
        MemorySegment[] l = layouts(n, k, nOut);
        MemorySegment results = arena.allocate(HEURISTIC_BYTES * count, 8), returned = arena.allocate(JAVA_INT);
        call("cublasLtMatmulAlgoGetHeuristic", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS,
                JAVA_INT, ADDRESS, ADDRESS), handle, desc, l[0], l[1], l[2], l[2], pref, count, results, returned);
        List<MemorySegment> out = new ArrayList<>();
        for (int i = 0; i < returned.get(JAVA_INT, 0); i++) {
            MemorySegment algo = arena.allocate(64, 8);
            algo.copyFrom(results.asSlice(HEURISTIC_BYTES * i, 64));
            out.add(algo);
        }
        return out;
    }

    private int config(MemorySegment algo, int attr) {
        MemorySegment v = arena.allocate(JAVA_INT), written = arena.allocate(JAVA_LONG);
        call("cublasLtMatmulAlgoConfigGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS),
                algo, attr, v, 4L, written);
        return v.get(JAVA_INT, 0);
    }

    /** Forces the algorithm to walk K whole (no split, no reduction); false if cuBLASLt then refuses it at 1 or LARGE rows. */
    private boolean splitFree(MemorySegment algo, int k, int nOut) {
        FunctionDescriptor set = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG);
        if (rawCall("cublasLtMatmulAlgoConfigSetAttribute", set, algo, CONFIG_SPLITK, arena.allocateFrom(JAVA_INT, 1), 4L) != 0
                || rawCall("cublasLtMatmulAlgoConfigSetAttribute", set, algo, CONFIG_REDUCTION, arena.allocateFrom(JAVA_INT, 0), 4L) != 0) {
            return false;
        }
        return supported(algo, k, nOut);
    }

    /** Whether cuBLASLt accepts the algorithm for this weight at 1, 7, 64 and {@value #LARGE} rows within the workspace. */
    private boolean supported(MemorySegment algo, int k, int nOut) {
        return supported(algo, k, nOut, new int[]{1, 7, 64, LARGE});
    }

    /** Whether cuBLASLt accepts the algorithm for this weight at each of {@code rows} within the workspace. */
    boolean supported(MemorySegment algo, int k, int nOut, int[] rows) {
        for (int n : rows) {
            MemorySegment[] l = layouts(n, k, nOut);
            MemorySegment result = arena.allocate(HEURISTIC_BYTES, 8);
            int status = rawCall("cublasLtMatmulAlgoCheck", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS,
                    ADDRESS, ADDRESS, ADDRESS), handle, desc, l[0], l[1], l[2], l[2], algo, result);
            if (status != 0 || result.get(JAVA_LONG, 64) > WORKSPACE) {
                return false;
            }
        }
        return true;
    }

    /** A candidate whose first run at a row count is within this factor of the best so far is timed again (the mean of two runs). */
    private static final double CONTENDER = 1.5;
    /** Between 1 and {@value #LARGE} rows, a candidate is timed where it is within this factor of its group's best at either end. */
    private static final double CONTENDER_ENDS = 2.0;

    /** Row-count buckets, each with its own (fastest) algorithm of one bit-identical group. */
    private static final int[] BUCKETS = {1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, LARGE};

    /** The algorithms a weight shape uses: algos[i] for up to BUCKETS[i] rows (the last beyond); the same bits for all. */
    private record Pinned(MemorySegment[] algos) {
        MemorySegment forRows(int n) {
            for (int i = 0; i < BUCKETS.length; i++) {
                if (n <= BUCKETS[i]) {
                    return algos[i];
                }
            }
            return algos[algos.length - 1];
        }
    }

    static String key(MemorySegment algo) {
        return java.util.HexFormat.of().formatHex(algo.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
    }

    /**
     * Picks the algorithms of one weight shape. Candidates are cuBLASLt's own, made split-free
     * and kept only if one row alone gives the bits it gives among {@value #PROBE} rows. They are
     * grouped by the exact bits they produce on random data: algorithms of one group differ in
     * tiling only, not in any output's summation, so the engine may use the group's fastest at one
     * row for decode and its fastest at {@value #LARGE} rows for prefill, and any other in between,
     * without losing batch invariance. The group whose best times at 1 and {@value #LARGE} rows are
     * closest to the overall bests wins; each row-count bucket then gets the group's fastest there.
     */
    private Pinned choose(int k, int nOut) {
        long t0 = System.nanoTime();
        List<MemorySegment> found = candidates(k, nOut);
        Map<String, MemorySegment> unique = new java.util.LinkedHashMap<>();
        for (MemorySegment algo : found) {
            if (splitFree(algo, k, nOut)) {
                unique.putIfAbsent(key(algo), algo);
            }
        }
        long tFound = System.nanoTime();
        long x = cuda.alloc((long) LARGE * k * 2), y = cuda.alloc((long) LARGE * nOut * outBytes), w = cuda.alloc((long) nOut * k * 2);
        fill.random(x, (long) LARGE * k, 11);
        fill.random(w, (long) nOut * k, 13);
        try (Arena host = Arena.ofConfined()) {
            MemorySegment probe = host.allocate((long) PROBE * nOut * outBytes), one = host.allocate((long) nOut * outBytes);
            long[] spent = new long[4]; // row checks, hashing, the 1-row and LARGE timings
            double bestLarge = Double.MAX_VALUE;
            List<MemorySegment> ok = new ArrayList<>();
            List<double[]> times = new ArrayList<>();
            List<String> groups = new ArrayList<>();
            for (MemorySegment algo : unique.values()) {
                long a = System.nanoTime();
                boolean invariant = rowInvariant(algo, x, k, w, nOut, y, probe, one);
                long b = System.nanoTime();
                spent[0] += b - a;
                if (!invariant) {
                    continue; // never used
                }
                groups.add(Long.toHexString(hash(probe)));
                long c = System.nanoTime();
                spent[1] += c - b;
                double t1 = cuda.time(() -> { for (int i = 0; i < 5; i++) run(x, 1, k, w, nOut, y, algo); }) / 5;
                long d = System.nanoTime();
                spent[2] += d - c;
                // one large run first (the row checks loaded its kernel); only a contender is timed again, as the mean of two: a
                // slow tiling of a large weight takes several times the best's time, and three runs of each were most of the search
                double tl = cuda.time(() -> run(x, LARGE, k, w, nOut, y, algo));
                if (tl < CONTENDER * bestLarge) {
                    tl = cuda.time(() -> { for (int i = 0; i < 2; i++) run(x, LARGE, k, w, nOut, y, algo); }) / 2;
                }
                bestLarge = Math.min(bestLarge, tl);
                spent[3] += System.nanoTime() - d;
                ok.add(algo);
                times.add(new double[]{t1, tl});
            }
            long tTimed = System.nanoTime();
            if (ok.isEmpty()) {
                throw new CudaException("cuBLASLt offers no split-free, row-invariant bf16 algorithm for " + nOut + " x " + k);
            }
            double best1 = times.stream().mapToDouble(t -> t[0]).min().orElseThrow();
            double bestL = times.stream().mapToDouble(t -> t[1]).min().orElseThrow();
            int pickSmall = -1, pickLarge = -1;
            double pickCost = Double.MAX_VALUE;
            for (String g : new java.util.LinkedHashSet<>(groups)) {
                int s = -1, l = -1;
                for (int i = 0; i < ok.size(); i++) {
                    if (groups.get(i).equals(g)) {
                        s = s < 0 || times.get(i)[0] < times.get(s)[0] ? i : s;
                        l = l < 0 || times.get(i)[1] < times.get(l)[1] ? i : l;
                    }
                }
                double cost = times.get(s)[0] / best1 + times.get(l)[1] / bestL;
                if (cost < pickCost) {
                    pickCost = cost;
                    pickSmall = s;
                    pickLarge = l;
                }
            }
            String group = groups.get(pickSmall);
            MemorySegment[] algos = new MemorySegment[BUCKETS.length];
            StringBuilder plan = new StringBuilder();
            for (int bi = 0; bi < BUCKETS.length; bi++) {
                int n = BUCKETS[bi], best = -1;
                double bestTime = Double.MAX_VALUE;
                for (int i = 0; i < ok.size(); i++) {
                    if (!groups.get(i).equals(group)) {
                        continue;
                    }
                    // between the ends, only a tiling within twice its group's best at one end is timed (a tiling slow at
                    // both ends is slow between them; which one runs a bucket changes speed, never bits: one group)
                    if (n != 1 && n != LARGE && times.get(i)[0] > CONTENDER_ENDS * times.get(pickSmall)[0]
                            && times.get(i)[1] > CONTENDER_ENDS * times.get(pickLarge)[1]) {
                        continue;
                    }
                    MemorySegment algo = ok.get(i);
                    double t = n == 1 ? times.get(i)[0] : n == LARGE ? times.get(i)[1] : cuda.time(() -> run(x, n, k, w, nOut, y, algo));
                    if (n != 1 && n != LARGE && t < CONTENDER * bestTime) {
                        t = cuda.time(() -> { for (int r = 0; r < 2; r++) run(x, n, k, w, nOut, y, algo); }) / 2; // a contender: two more runs
                    }
                    if (t < bestTime) {
                        bestTime = t;
                        best = i;
                    }
                }
                algos[bi] = ok.get(best);
                plan.append(String.format(" %d: tile %d %.1f us;", n, config(algos[bi], CONFIG_TILE), bestTime * 1e6));
            }
            long tEnd = System.nanoTime();
            choices.add(String.format(java.util.Locale.ROOT, "%d x %d: %d row-invariant candidates in %d bit-identical groups; best overall 1 row"
                            + " %.1f us, %d rows %.1f us; per rows bucket:%s search: candidates %.2f s, row checks %.2f s, hashing %.2f s,"
                            + " 1-row timing %.2f s, %d-row timing %.2f s, buckets %.2f s;", nOut, k, ok.size(), new java.util.HashSet<>(groups).size(),
                    best1 * 1e6, LARGE, bestL * 1e6, plan, (tFound - t0) / 1e9, spent[0] / 1e9, spent[1] / 1e9, spent[2] / 1e9, LARGE, spent[3] / 1e9,
                    (tEnd - tTimed) / 1e9));
            return new Pinned(algos);
        } finally {
            cuda.sync();
            cuda.free(x);
            cuda.free(y);
            cuda.free(w);
        }
    }

    /**
     * Whether the algorithm gives the first row of x alone the bits it gives it among {@value #PROBE} rows;
     * leaves the {@value #PROBE} rows' output in probe (host), using one (host, one row) as scratch.
     */
    boolean rowInvariant(MemorySegment algo, long x, int k, long w, int nOut, long y, MemorySegment probe, MemorySegment one) {
        run(x, PROBE, k, w, nOut, y, algo);
        cuda.copyToHost(probe, y);
        run(x, 1, k, w, nOut, y, algo);
        cuda.copyToHost(one, y);
        return one.mismatch(probe.asSlice(0, one.byteSize())) == -1;
    }

    static long hash(MemorySegment s) {
        long h = 1125899906842597L;
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            h = 31 * h + s.get(JAVA_LONG_UNALIGNED, i);
        }
        return h;
    }

    /** One line per weight shape: the algorithm pinned and its timings. */
    public List<String> choices() {
        return List.copyOf(choices);
    }

}

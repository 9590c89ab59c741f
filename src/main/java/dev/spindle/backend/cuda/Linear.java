package dev.spindle.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The bf16 linear layer {@code y = bf16(x @ W^T)} of the forward pass: Spindle's own
 * {@code linear_rows} kernels for few rows (decode steps), cuBLASLt's pinned algorithms otherwise.
 * Both feed each output's fp32 accumulator k's 16-wide chunks in order, so they give the same
 * bits, and a row's result never depends on how many rows share the call. That is checked, not
 * assumed: {@link #prepare} runs every kernel variant on each weight shape (its real weights,
 * random rows) at several row counts against cuBLASLt, keeps those that agree in every bit, and
 * gives each row bucket (up to 8, 16, 32, 64 rows) the fastest of them and cuBLASLt (the first, in a fixed order, of
 * those within {@link #CHOICE_TOLERANCE} of the fastest: a start's timing noise does not flip the choice).
 */
public final class Linear {
    private static final System.Logger LOG = System.getLogger("dev.spindle.cuda");
    /** Row buckets; each is timed at its first row count (one row: decode at batch 1). */
    private static final int[][] BUCKETS = {{1, 8}, {16, 16}, {32, 32}, {64, 64}};
    static final int[] CHECKED_ROWS = {1, 3, 8, 9, 16, 17, 32, 33, 63, 64};

    private final CudaKernels kernels;
    private final CudaDriver cuda;
    private final CublasLt lt;
    /** Per weight shape (k << 32 | nOut): the variant of each row bucket (null: cuBLASLt). */
    private final Map<Long, LinearRowsVariant[]> plans = new HashMap<>();
    /** The same for fp8 weights (their fp8 twins; null: expanded to bf16, then cuBLASLt). */
    private final Map<Long, LinearRowsVariant[]> fp8Plans = new HashMap<>();
    /** Where fp8 and the expanded formats are expanded to bf16 for cuBLASLt. */
    private final Expansion expansion;
    /** The kernel's tensor maps (device addresses): of each weight per box height, and of each input buffer per k and row tiles. */
    private final Map<WeightKey, Long> weightMaps = new HashMap<>();
    private final Map<InputKey, Long> inputMaps = new HashMap<>();
    private final List<String> choices = new ArrayList<>();
    /** cuBLASLt with fp32 outputs, for a tensor-parallel rank's row-parallel partials; null until {@link #usePartials}. */
    private CublasLt partials;

    /** The EXL3 layers' launches and scratch. */
    private final Exl3Linear exl3;

    public Linear(CudaKernels kernels, CublasLt lt) {
        this.kernels = kernels;
        this.cuda = kernels.driver();
        this.lt = lt;
        this.exl3 = new Exl3Linear(kernels.exl3(), cuda);
        this.expansion = new Expansion(cuda);
    }

    /** {@code y = x @ W^T} for a weight in its format: x (n, w.cols()), y (n, w.rows()), bf16; in stream order. */
    void apply(long x, int n, DeviceMatrix w, long y) {
        switch (w) {
            case DeviceMatrix.Bf16 b -> apply(x, n, b.cols(), b.data(), b.rows(), y);
            case DeviceMatrix.Fp8 f -> applyFp8(x, n, f, y);
            case DeviceMatrix.Exl3 e -> exl3.apply(x, n, e, y);
            case DeviceMatrix.Expanded e -> {
                expansion.expand(kernels.expand(), e);
                lt.linear(x, n, e.cols(), expansion.address(), e.rows(), y);
            }
        }
    }

    /**
     * y = x @ W^T over an fp8 weight: its fp8 few-row kernel where {@link #prepareFp8} chose one for n rows, else its values
     * expanded to bf16 ({@link Fp8Kernels#dequant}) and cuBLASLt's pinned GEMM over them. The same bits either way.
     */
    private void applyFp8(long x, int n, DeviceMatrix.Fp8 f, long y) {
        int k = f.cols(), nOut = f.rows();
        LinearRowsVariant v = variant(fp8Plans, k, nOut, n);
        if (v != null) {
            Long mw = weightMaps.get(WeightKey.of(f.data(), v)), mx = inputMaps.get(inputKey(x, k, v.tiles()));
            if (mw != null && mx != null) {
                kernels.fp8().linearRows(v, mx, n, mw, f, y);
                return;
            }
        }
        kernels.fp8().dequant(f, expansion.address());
        lt.linear(x, n, k, expansion.address(), nOut, y);
    }

    /** {@link #applyPartial(long, int, int, long, int, long)} for a weight in its format. */
    void applyPartial(long x, int n, DeviceMatrix w, long y) {
        switch (w) {
            case DeviceMatrix.Bf16 b -> applyPartial(x, n, b.cols(), b.data(), b.rows(), y);
            case DeviceMatrix.Fp8 f -> throw noPartials(f);
            case DeviceMatrix.Exl3 e -> throw noPartials(e);
            case DeviceMatrix.Expanded e -> throw noPartials(e);
        }
    }

    private static UnsupportedOperationException noPartials(DeviceMatrix w) {
        return new UnsupportedOperationException(w.getClass().getSimpleName()
                + " weights with tensor parallelism: a row-parallel rank's fp32 partials are bf16-only so far");
    }

    /** {@link #prepare(int, long, int)} for a weight in its format: its GEMMs chosen now, never in the middle of a step. */
    void prepare(DeviceMatrix w) {
        switch (w) {
            case DeviceMatrix.Bf16 b -> prepare(b.cols(), b.data(), b.rows());
            case DeviceMatrix.Fp8 f -> prepareFp8(f);
            case DeviceMatrix.Exl3 e -> exl3.prepare(e);
            case DeviceMatrix.Expanded e -> {
                String line = expansion.prepare(kernels.expand(), lt, e);
                if (!choices.contains(line)) {
                    choices.add(line);
                }
            }
        }
    }

    /** {@link #preparePartial(int, long, int)} for a weight in its format. */
    void preparePartial(DeviceMatrix w) {
        switch (w) {
            case DeviceMatrix.Bf16 b -> preparePartial(b.cols(), b.data(), b.rows());
            case DeviceMatrix.Fp8 f -> throw noPartials(f);
            case DeviceMatrix.Exl3 e -> throw noPartials(e);
            case DeviceMatrix.Expanded e -> throw noPartials(e);
        }
    }

    /** {@link #weight(long, int, int)} for a weight in its format: what the few-row kernel reads of it, set up now. */
    void weight(DeviceMatrix w) {
        switch (w) {
            case DeviceMatrix.Bf16 b -> weight(b.data(), b.cols(), b.rows());
            case DeviceMatrix.Fp8 f -> weightFp8(f);
            case DeviceMatrix.Exl3 e -> {
                // the EXL3 kernels read the trellis through plain loads: no tensor maps
            }
            case DeviceMatrix.Expanded e -> {
                // cuBLASLt reads the expansion: no tensor maps
            }
        }
    }

    /** The fp8 few-row kernels' tensor maps of an fp8 weight's codes (as {@link #weight(long, int, int)}). */
    private void weightFp8(DeviceMatrix.Fp8 f) {
        LinearRowsVariant[] plan = fp8Plans.get(key(f.cols(), f.rows()));
        if (f.cols() % 64 != 0 || !Fp8Kernels.takes(f)) {
            return;
        }
        for (LinearRowsVariant v : kernels.fp8().variants(f)) {
            boolean planned = plan == null || java.util.Arrays.stream(plan).anyMatch(p -> p != null && WeightKey.of(0, p).equals(WeightKey.of(0, v)));
            if (planned) {
                weightMaps.computeIfAbsent(WeightKey.of(f.data(), v), key -> v.mma()
                        ? TensorMaps.u8Swizzled(cuda, f.data(), f.rows(), f.cols(), f.cols(), v.weightRows(), 64)
                        : TensorMaps.u8(cuda, f.data(), f.rows(), f.cols(), f.cols(), v.weightRows(), 64));
            }
        }
    }

    /** y (n, nOut) = bf16(x (n, k) @ W^T), W (nOut, k): row-major bf16 device arrays; in stream order. */
    public void apply(long x, int n, int k, long w, int nOut, long y) {
        LinearRowsVariant v = variant(plans, k, nOut, n);
        if (v != null) {
            Long mw = weightMaps.get(WeightKey.of(w, v)), mx = inputMaps.get(inputKey(x, k, v.tiles()));
            if (mw != null && mx != null) {
                kernels.linearRows(v, mx, n, k, mw, nOut, y);
                return;
            }
        }
        lt.linear(x, n, k, w, nOut, y);
    }

    /** The few-row variant the plan of shape (k, nOut) gives n rows, or null (cuBLASLt). */
    private static LinearRowsVariant variant(Map<Long, LinearRowsVariant[]> plans, int k, int nOut, int n) {
        LinearRowsVariant[] plan = plans.get(key(k, nOut));
        if (plan == null) {
            throw new IllegalStateException("linear layer " + nOut + " x " + k + " used before prepare()");
        }
        for (int b = 0; b < BUCKETS.length; b++) {
            if (n <= BUCKETS[b][1]) {
                return plan[b];
            }
        }
        return null;
    }

    /** Gives the layer an fp32-output cuBLASLt ({@link CublasLt#open(CudaKernels, boolean)}) for {@link #applyPartial}. */
    public void usePartials(CublasLt f32) {
        this.partials = f32;
    }

    /**
     * y (n, nOut) = x (n, k) @ W^T in fp32, not rounded: a tensor-parallel rank's partial of a row-parallel layer, summed
     * over the ranks before its one rounding (TensorParallelLayout). cuBLASLt's pinned split-free algorithms (row-invariant
     * as the bf16 ones); linear_rows writes bf16 only.
     */
    public void applyPartial(long x, int n, int k, long w, int nOut, long y) {
        if (partials == null) {
            throw new IllegalStateException("partial outputs without usePartials()");
        }
        partials.linear(x, n, k, w, nOut, y);
    }

    /** Pins the partial GEMM's algorithms of weight w (nOut, k) now (from the cache, or searched), never in the middle of a step. */
    public void preparePartial(int k, long w, int nOut) {
        long x = cuda.alloc((long) k * 2), y = cuda.alloc((long) nOut * 4);
        try {
            cuda.memsetZero(x, (long) k * 2);
            applyPartial(x, 1, k, w, nOut, y);
            cuda.sync();
        } finally {
            cuda.free(x);
            cuda.free(y);
        }
    }

    /**
     * The kernel's tensor map of a weight (nOut, k); nothing where the kernel cannot run or where {@link #prepare}
     * gave the shape to cuBLASLt at every row count. Call before capturing steps.
     */
    public void weight(long w, int k, int nOut) {
        LinearRowsVariant[] plan = plans.get(key(k, nOut));
        if (k % 64 != 0) {
            return;
        }
        for (LinearRowsVariant v : kernels.linearRowsVariants()) {
            // before prepare() every box height; after it, the heights of the variants it chose
            boolean planned = plan == null || java.util.Arrays.stream(plan).anyMatch(p -> p != null && p.weightRows() == v.weightRows());
            if (planned) {
                weightMaps.computeIfAbsent(WeightKey.of(w, v), key -> TensorMaps.bf16(cuda, w, nOut, k, k, v.weightRows(), 64));
            }
        }
    }

    /** The kernel's tensor maps of an input buffer of up to {@code rows} rows of k (one per row tiles of the variants). */
    public void input(long x, int rows, int k) {
        if (k % 64 != 0) {
            return;
        }
        for (LinearRowsVariant v : kernels.linearRowsVariants()) {
            inputMaps.computeIfAbsent(inputKey(x, k, v.tiles()), key -> TensorMaps.bf16(cuda, x, rows, k, k, v.rows(), 64));
        }
    }

    /**
     * Forgets the tensor maps of a weight or input buffer about to be freed: a later allocation may reuse its address
     * for another shape, which a cached map would then describe wrongly (a draft head's buffers, freed with it).
     */
    public void forget(long ptr) {
        freeWhere(weightMaps, key -> key.w() == ptr);
        freeWhere(inputMaps, key -> key.x() == ptr);
    }

    /** Frees and forgets the tensor maps whose key matches. */
    private <K> void freeWhere(Map<K, Long> maps, java.util.function.Predicate<K> match) {
        maps.entrySet().removeIf(e -> {
            if (match.test(e.getKey())) {
                cuda.free(e.getValue());
                return true;
            }
            return false;
        });
    }

    /** A weight's tensor map: per weight, box height (the variant's weight rows) and the mma variants' swizzle. */
    private record WeightKey(long w, int rows, boolean mma) {
        static WeightKey of(long w, LinearRowsVariant v) {
            return new WeightKey(w, v.weightRows(), v.mma());
        }
    }

    /** An input buffer's tensor map: per buffer, k and row tiles (the box height). */
    private record InputKey(long x, int k, int tiles) {
    }

    private static InputKey inputKey(long x, int k, int tiles) {
        return new InputKey(x, k, tiles);
    }

    /** The tensor map {@link #input} made of buffer x for k and row tiles, or null. */
    Long inputMap(long x, int k, int tiles) {
        return inputMaps.get(inputKey(x, k, tiles));
    }

    /**
     * Pins cuBLASLt's algorithms for this weight, checks every linear_rows variant against them (the same
     * bits at every checked row count it takes) and gives each row bucket the faster of the agreeing
     * variants and cuBLASLt. Synchronizes; call before capturing or timing steps.
     */
    public void prepare(int k, long w, int nOut) {
        if (plans.containsKey(key(k, nOut))) {
            return;
        }
        weight(w, k, nOut);
        choose(plans, "", k, nOut, kernels.linearRowsVariants(), new Candidates() {
            @Override
            public void reference(long x, int n, long y) {
                lt.linear(x, n, k, w, nOut, y);
            }

            @Override
            public void inStep(long x, int n, long y) {
                lt.linear(x, n, k, w, nOut, y);
            }

            @Override
            public void variant(LinearRowsVariant v, long x, int n, long y) {
                kernels.linearRows(v, inputMaps.get(inputKey(x, k, v.tiles())), n, k, weightMaps.get(WeightKey.of(w, v)), nOut, y);
            }
        });
    }

    /**
     * As {@link #prepare(int, long, int)} for an fp8 weight: its values expanded to bf16 and cuBLASLt's pinned GEMM over them
     * give the bits every fp8 few-row kernel must give (checked on this weight); the expansion's cost counts in cuBLASLt's
     * time, as it does in a step.
     */
    private void prepareFp8(DeviceMatrix.Fp8 f) {
        int k = f.cols(), nOut = f.rows();
        if (fp8Plans.containsKey(key(k, nOut))) {
            return;
        }
        expansion.grow(f.expandedBytes());
        long expanded = expansion.address();
        kernels.fp8().dequant(f, expanded);
        weightFp8(f);
        List<LinearRowsVariant> variants = kernels.fp8().variants(f);
        choose(fp8Plans, "fp8 ", k, nOut, variants, new Candidates() {
            @Override
            public void reference(long x, int n, long y) {
                lt.linear(x, n, k, expanded, nOut, y);
            }

            @Override
            public void inStep(long x, int n, long y) {
                kernels.fp8().dequant(f, expanded);
                lt.linear(x, n, k, expanded, nOut, y);
            }

            @Override
            public void variant(LinearRowsVariant v, long x, int n, long y) {
                kernels.fp8().linearRows(v, inputMaps.get(inputKey(x, k, v.tiles())), n, weightMaps.get(WeightKey.of(f.data(), v)), f, y);
            }
        });
    }

    /** What {@link #choose} compares for one weight: cuBLASLt's bits, cuBLASLt as a step runs it, and a few-row variant. */
    private interface Candidates {
        void reference(long x, int n, long y);

        void inStep(long x, int n, long y);

        void variant(LinearRowsVariant v, long x, int n, long y);
    }

    /**
     * Checks each of {@code variants} against cuBLASLt's bits at every checked row count it takes, then gives each row bucket
     * the fastest of the agreeing ones and cuBLASLt (its {@link Candidates#inStep} cost), into {@code into}. The weight's
     * tensor maps are made.
     */
    private void choose(Map<Long, LinearRowsVariant[]> into, String format, int k, int nOut, List<LinearRowsVariant> variants, Candidates c) {
        long t0 = System.nanoTime();
        int max = 64;
        long x = cuda.alloc((long) max * k * 2), y1 = cuda.alloc((long) max * nOut * 2), y2 = cuda.alloc((long) max * nOut * 2);
        LinearRowsVariant[] plan = new LinearRowsVariant[BUCKETS.length];
        try (Arena host = Arena.ofConfined()) {
            kernels.fillDummy(x, (long) max * k, 0x51CE + k, 0f, 1f);
            c.reference(x, 1, y1); // pins cuBLASLt's algorithms for the shape
            input(x, max, k);
            List<LinearRowsVariant> agree = new ArrayList<>();
            String refused = "";
            if (k % 64 != 0) {
                refused = " (k is not a multiple of 64)";
            } else {
                for (LinearRowsVariant v : variants) {
                    if (k % v.keys() == 0) {
                        agree.add(v);
                    }
                }
                // cuBLASLt's bits once per checked row count; every variant that takes that many rows against them
                MemorySegment a = host.allocate((long) max * nOut * 2), b = host.allocate(a.byteSize());
                for (int n : CHECKED_ROWS) {
                    c.reference(x, n, y1);
                    cuda.copyToHost(a, y1);
                    for (java.util.Iterator<LinearRowsVariant> it = agree.iterator(); it.hasNext(); ) {
                        LinearRowsVariant v = it.next();
                        if (n > v.rows()) {
                            continue;
                        }
                        cuda.memsetZero(y2, (long) n * nOut * 2); // a variant that leaves outputs unwritten must not pass on an earlier one's
                        c.variant(v, x, n, y2);
                        cuda.copyToHost(b, y2);
                        long at = a.asSlice(0, (long) n * nOut * 2).mismatch(b.asSlice(0, (long) n * nOut * 2));
                        if (at != -1) {
                            String why = String.format("%s gave other bits than cuBLASLt at %d rows (row %d, output %d)", format.isEmpty() ? v.kernel() : v.fp8Kernel(), n,
                                    at / 2 / nOut, at / 2 % nOut);
                            refused += "; " + why;
                            LOG.log(System.Logger.Level.WARNING, nOut + " x " + k + ": " + why + "; that variant is not used");
                            it.remove();
                        }
                    }
                }
            }
            StringBuilder timed = new StringBuilder();
            for (int bi = 0; bi < BUCKETS.length && !agree.isEmpty(); bi++) {
                int n = BUCKETS[bi][0], rows = BUCKETS[bi][1];
                List<LinearRowsVariant> candidates = new ArrayList<>();
                candidates.add(null); // cuBLASLt
                List<Double> seconds = new ArrayList<>();
                seconds.add(time(() -> c.inStep(x, n, y1)));
                timed.append(String.format(" %d rows: cuBLASLt %.1f", n, seconds.getFirst() * 1e6));
                for (LinearRowsVariant v : agree) {
                    if (v.rows() != rows) {
                        continue;
                    }
                    double t = time(() -> c.variant(v, x, n, y2));
                    timed.append(String.format(", %s %.1f", v.label(), t * 1e6));
                    candidates.add(v);
                    seconds.add(t);
                }
                plan[bi] = candidates.get(steadyChoice(seconds, CHOICE_TOLERANCE));
                timed.append(" us;");
            }
            into.put(key(k, nOut), plan);
            StringBuilder use = new StringBuilder();
            for (int bi = 0; bi < BUCKETS.length; bi++) {
                LinearRowsVariant v = plan[bi];
                use.append(String.format(" <=%d rows %s;", BUCKETS[bi][1], v == null ? format + "cuBLASLt" : format + "linear_rows " + v.label()));
            }
            choices.add(String.format(java.util.Locale.ROOT, "%s%d x %d: linear_rows variants with cuBLASLt's bits: %d of %d%s; use:%s timed:%s"
                            + " (with cuBLASLt's choice, %.2f s)", format, nOut, k, agree.size(), variants.size(), refused, use, timed,
                    (System.nanoTime() - t0) / 1e9));
        } finally {
            cuda.sync();
            for (LinearRowsVariant v : variants) {
                Long m = inputMaps.remove(inputKey(x, k, v.tiles()));
                if (m != null) {
                    cuda.free(m);
                }
            }
            cuda.free(x);
            cuda.free(y1);
            cuda.free(y2);
        }
    }

    /**
     * How much slower than the fastest a candidate may time and still be chosen for coming first: candidates within
     * this of each other are not told apart by one start's timing (a few percent between processes), and taking the
     * fastest of them flipped the choice between starts (o_proj's 32-row bucket, b1 s8 or b2 s6, in four of four
     * comparisons on 2026-12-05), which moved whole decode figures by a few percent.
     */
    static final double CHOICE_TOLERANCE = 0.015;

    /**
     * The candidate a bucket uses: the first, in their fixed order (cuBLASLt, then the variants as the kernel table lists
     * them), whose time is within {@code tolerance} of the fastest. The same timings up to noise give the same choice.
     */
    static int steadyChoice(List<Double> seconds, double tolerance) {
        double best = seconds.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        for (int i = 0; i < seconds.size(); i++) {
            if (seconds.get(i) <= best * (1 + tolerance)) {
                return i;
            }
        }
        throw new IllegalStateException("no fastest candidate in " + seconds);
    }

    /** Seconds per call on the GPU, as in a decode step's graph ({@link GraphCapture#secondsPerCall}). */
    double time(Runnable call) {
        return GraphCapture.secondsPerCall(cuda, kernels.dependentLaunches(), call);
    }

    /** Frees the tensor maps (the weights and buffers they describe belong to the caller). */
    public void close() {
        expansion.close();
        exl3.close();
        weightMaps.values().forEach(cuda::free);
        inputMaps.values().forEach(cuda::free);
        weightMaps.clear();
        inputMaps.clear();
    }

    /** One line per weight shape: cuBLASLt's pinned algorithms, then where linear_rows runs and the timings behind it. */
    public List<String> choices() {
        List<String> all = new ArrayList<>(lt.choices());
        all.addAll(choices);
        all.addAll(exl3.choices());
        if (partials != null) {
            partials.choices().forEach(line -> all.add("fp32 partial " + line));
        }
        return all;
    }

    private static long key(int k, int nOut) {
        return ((long) k << 32) | nOut;
    }
}

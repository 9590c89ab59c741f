package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A linear layer and the small kernel after it (SwiGLU after gate|up, rope_kv_write after q|k|v) in one launch, for
 * decode steps on Hopper: linear_rows' paired CTAs ({@link CudaKernels#linearRowsPaired}) apply the kernel in their
 * epilogue to the outputs linear_rows computes, so the result is that of {@link Linear} followed by the kernel, bit for
 * bit, and one launch of a decode layer's ten falls away for each. That is checked, not assumed: {@link #prepare} runs
 * every paired variant on each weight shape (its real weights, random rows) at {@link Linear#CHECKED_ROWS} of up to 8 against the
 * layer then the kernel, and gives steps of up to 8 rows the faster of the agreeing variants and the two launches (more
 * rows always run the two launches). {@link PairingChoice} then checks the choice in whole decode steps.
 */
final class PairedLinear {
    private static final System.Logger LOG = System.getLogger("dev.spindle.cuda");

    private final CudaKernels kernels;
    private final CudaDriver cuda;
    private final Linear linear;
    /** Per epilogue kind and weight shape (once prepared): the paired variant of steps of up to {@link #ROWS} rows, or null (the layer, then the kernel). */
    private final Map<PlanKey, LinearRowsVariant> plans = new HashMap<>();
    /** Rows a paired twin takes (one row tile): decode steps of batch 1 to 8; more rows run the two launches. */
    static final int ROWS = 8;
    /** The paired kernel's tensor map (a box of 32 rows x 64) of each weight it reads. */
    private final Map<Long, Long> weightMaps = new HashMap<>();
    private final List<String> choices = new ArrayList<>();

    PairedLinear(CudaKernels kernels, Linear linear) {
        this.kernels = kernels;
        this.cuda = kernels.driver();
        this.linear = linear;
    }

    /** An epilogue's kind and the weight's shape (W is (nOut, k)). */
    private record PlanKey(Class<? extends PairedEpilogue> kind, int k, int nOut) {
    }

    private static PlanKey key(PairedEpilogue e, int k) {
        return new PlanKey(e.getClass(), k, e.outputs());
    }

    /**
     * out = epilogue e of x (n, k) @ W^T (W: (e.outputs(), k)): for SwiGLU, out is (n, width) and scratch (n, 2 width)
     * takes gate|up where the two launches run; for rope_kv_write, out is the (n, outputs) qkv rows (scratch unused).
     */
    void apply(PairedEpilogue e, long x, int n, int k, long w, long out, long scratch) {
        LinearRowsVariant v = variant(e, k, n);
        Long mw = v == null ? null : weightMaps.get(w), mx = v == null ? null : linear.inputMap(x, k, v.tiles());
        if (mw != null && mx != null) {
            kernels.linearRowsPaired(v, mx, n, k, mw, e.outputs(), out, e);
        } else {
            unpaired(e, x, n, k, w, out, scratch);
        }
    }

    /** Whether {@link #apply} runs one launch (a paired variant) for n rows of this epilogue and k. */
    boolean pairs(PairedEpilogue e, int k, int n) {
        return variant(e, k, n) != null;
    }

    private LinearRowsVariant variant(PairedEpilogue e, int k, int n) {
        PlanKey key = key(e, k);
        if (!plans.containsKey(key)) {
            throw new IllegalStateException("paired " + e.getClass().getSimpleName() + " " + e.outputs() + " x " + k + " used before prepare()");
        }
        return n <= ROWS ? plans.get(key) : null;
    }

    /** The layer, then the epilogue's own kernel. */
    private void unpaired(PairedEpilogue e, long x, int n, int k, long w, long out, long scratch) {
        switch (e) {
            case PairedEpilogue.Swiglu s -> {
                linear.apply(x, n, k, w, s.outputs(), scratch);
                kernels.swiglu(scratch, out, n, s.width());
            }
            case PairedEpilogue.RopeKvWrite r -> {
                linear.apply(x, n, k, w, r.outputs(), out);
                kernels.ropeKvWrite(out, r.outputs(), r.cos(), r.sin(), r.positions(), n, r.qHeads(), r.kvHeads(), r.headDim(), r.pool(),
                        r.slotMap(), r.blockSize());
            }
        }
    }

    /** Runs variant v (a paired twin) for steps of up to 8 rows of this epilogue and k, whatever the timing chose (tests). */
    void use(PairedEpilogue shape, int k, LinearRowsVariant v) {
        PlanKey key = key(shape, k);
        if (!plans.containsKey(key) || !kernels.pairedRowsVariants().contains(v) || k % v.keys() != 0) {
            throw new IllegalArgumentException("paired " + v + " for " + shape + ", k " + k + ": not prepared, not on this device, or k not a multiple of "
                    + v.keys());
        }
        plans.put(key, v);
    }

    /** The paired kernel's tensor map of a weight whose plan uses it somewhere (nothing otherwise). Call before capturing steps. */
    void weight(PairedEpilogue shape, long w, int k) {
        if (plans.get(key(shape, k)) != null) {
            weightMaps.computeIfAbsent(w, key -> TensorMaps.bf16(cuda, w, shape.outputs(), k, k, 32, 64));
        }
    }

    /**
     * Checks every paired variant on weight w against the layer (its plan from {@link Linear#prepare}, which must have run)
     * then the kernel at the row counts the twins take, and times the agreeing ones at one row against the two launches. {@code shape} gives the
     * epilogue's kind and sizes; its pointers are not read (the check makes its own tables, positions and pool).
     * Synchronizes; call before capturing or timing steps.
     */
    void prepare(PairedEpilogue shape, int k, long w) {
        PlanKey key = key(shape, k);
        if (plans.containsKey(key)) {
            return;
        }
        long t0 = System.nanoTime();
        int max = 64, nOut = shape.outputs(); // scratch rows: Linear.input makes x's maps for every variant's box, up to 64 rows
        List<LinearRowsVariant> agree = new ArrayList<>();
        for (LinearRowsVariant v : kernels.pairedRowsVariants()) {
            if (k % v.keys() == 0) {
                agree.add(v);
            }
        }
        String name = shape instanceof PairedEpilogue.Swiglu ? "gate_up + swiglu" : "qkv + rope_kv_write";
        if (agree.isEmpty()) {
            plans.put(key, null);
            choices.add(String.format("%s %d x %d: no paired linear_rows variant on this device for k %d: two launches", name, nOut, k, k));
            return;
        }
        Scratch s = new Scratch(shape, max, k);
        long mw = TensorMaps.bf16(cuda, w, nOut, k, k, 32, 64);
        weightMaps.put(w, mw);
        String refused = "";
        try (Arena host = Arena.ofConfined()) {
            linear.input(s.x, max, k);
            for (int n : Linear.CHECKED_ROWS) {
                if (n > ROWS) {
                    continue; // rows no twin takes
                }
                s.clear();
                unpaired(s.e1, s.x, n, k, w, s.out1, s.scratch);
                MemorySegment want = s.bits(host, s.out1, s.pool1, n);
                for (java.util.Iterator<LinearRowsVariant> it = agree.iterator(); it.hasNext(); ) {
                    LinearRowsVariant v = it.next();
                    if (n > v.rows()) {
                        continue;
                    }
                    s.clear2(); // a variant that leaves outputs unwritten must not pass on an earlier one's
                    kernels.linearRowsPaired(v, linear.inputMap(s.x, k, v.tiles()), n, k, mw, nOut, s.out2, s.e2);
                    long at = want.mismatch(s.bits(host, s.out2, s.pool2, n));
                    if (at != -1) {
                        String why = String.format("paired %s gave other bits than the two launches at %d rows (byte %d of %d)", v.label(), n, at,
                                want.byteSize());
                        refused += "; " + why;
                        LOG.log(System.Logger.Level.WARNING, name + " " + nOut + " x " + k + ": " + why + "; that variant is not used");
                        it.remove();
                    }
                }
            }
            // the two launches, then each agreeing twin, at one row (a batch-1 decode step's GEMM)
            LinearRowsVariant chosen = null;
            double best = linear.time(() -> unpaired(s.e1, s.x, 1, k, w, s.out1, s.scratch));
            StringBuilder timed = new StringBuilder(String.format(" 1 row: two launches %.1f", best * 1e6));
            for (LinearRowsVariant v : agree) {
                double t = linear.time(() -> kernels.linearRowsPaired(v, linear.inputMap(s.x, k, v.tiles()), 1, k, mw, nOut, s.out2, s.e2));
                timed.append(String.format(", %s %.1f", v.label(), t * 1e6));
                if (t < best) {
                    best = t;
                    chosen = v;
                }
            }
            String use = String.format(" <=%d rows %s; more rows two launches;", ROWS, chosen == null ? "two launches" : "paired " + chosen.label());
            choices.add(String.format(java.util.Locale.ROOT, "%s %d x %d: paired linear_rows variants with the two launches' bits: %d of %d%s; use:%s"
                    + " timed:%s us (%.2f s)", name, nOut, k, agree.size(), kernels.pairedRowsVariants().size(), refused, use, timed, (System.nanoTime() - t0) / 1e9));
            plans.put(key, chosen);
        } finally {
            cuda.sync();
            // the weight's map is made again by weight() where the plan uses it (the layers' other weights need theirs too)
            weightMaps.remove(w);
            cuda.free(mw);
            linear.forget(s.x);
            s.free();
        }
    }

    /**
     * The check's device buffers: random rows x, both ways' outputs, and for rope_kv_write its own tables (random
     * bf16-valued cos and sin), positions, slot map (rows in reverse, across blocks of 16) and two pools.
     */
    private final class Scratch {
        final long x, out1, out2, scratch, pool1, pool2, outBytes, poolBytes;
        final int rows;
        final List<Long> all = new ArrayList<>();
        final PairedEpilogue e1, e2;

        Scratch(PairedEpilogue shape, int rows, int k) {
            this.rows = rows;
            x = alloc((long) rows * k * 2);
            kernels.fillDummy(x, (long) rows * k, 0x9A1 + k, 0f, 1f);
            int nOut = shape.outputs();
            switch (shape) {
                case PairedEpilogue.Swiglu sw -> {
                    outBytes = (long) rows * sw.width() * 2;
                    scratch = alloc((long) rows * nOut * 2);
                    poolBytes = 0;
                    pool1 = pool2 = 0;
                    e1 = e2 = sw;
                }
                case PairedEpilogue.RopeKvWrite r -> {
                    outBytes = (long) rows * nOut * 2;
                    scratch = 0;
                    int block = 16, positions = 4 * rows, half = r.headDim() / 2;
                    poolBytes = (long) ((rows + block - 1) / block) * 2 * block * r.kvHeads() * r.headDim() * 2;
                    pool1 = alloc(poolBytes);
                    pool2 = alloc(poolBytes);
                    long cos = alloc((long) positions * half * 4), sin = alloc((long) positions * half * 4);
                    long pos = alloc(rows * 4L), slots = alloc(rows * 4L);
                    java.util.Random rnd = new java.util.Random(0x51DE);
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment table = a.allocate((long) positions * half * 4), ints = a.allocate(rows * 4L);
                        for (long i = 0; i < (long) positions * half; i++) {
                            table.setAtIndex(JAVA_FLOAT, i, Bf16.round((float) (2 * rnd.nextDouble() - 1)));
                        }
                        cuda.copyToDevice(cos, table);
                        for (long i = 0; i < (long) positions * half; i++) {
                            table.setAtIndex(JAVA_FLOAT, i, Bf16.round((float) (2 * rnd.nextDouble() - 1)));
                        }
                        cuda.copyToDevice(sin, table);
                        for (int i = 0; i < rows; i++) {
                            ints.setAtIndex(JAVA_INT, i, rnd.nextInt(positions));
                        }
                        cuda.copyToDevice(pos, ints);
                        for (int i = 0; i < rows; i++) {
                            ints.setAtIndex(JAVA_INT, i, rows - 1 - i);
                        }
                        cuda.copyToDevice(slots, ints);
                    }
                    e1 = new PairedEpilogue.RopeKvWrite(cos, sin, pos, r.qHeads(), r.kvHeads(), r.headDim(), pool1, slots, block);
                    e2 = new PairedEpilogue.RopeKvWrite(cos, sin, pos, r.qHeads(), r.kvHeads(), r.headDim(), pool2, slots, block);
                }
            }
            out1 = alloc(outBytes);
            out2 = alloc(outBytes);
        }

        private long alloc(long bytes) {
            long p = cuda.alloc(bytes);
            all.add(p);
            return p;
        }

        /** Zeroes the first way's output and pool. */
        void clear() {
            cuda.memsetZero(out1, outBytes);
            if (poolBytes > 0) {
                cuda.memsetZero(pool1, poolBytes);
            }
        }

        /** Zeroes the paired way's output and pool. */
        void clear2() {
            cuda.memsetZero(out2, outBytes);
            if (poolBytes > 0) {
                cuda.memsetZero(pool2, poolBytes);
            }
        }

        /** The output (and pool) of one way, as bytes: its first n rows of out, then the whole pool. */
        MemorySegment bits(Arena host, long out, long pool, int n) {
            long o = outBytes / rows * n;
            MemorySegment h = host.allocate(o + poolBytes);
            cuda.sync();
            cuda.copyToHost(h.asSlice(0, o), out);
            if (poolBytes > 0) {
                cuda.copyToHost(h.asSlice(o, poolBytes), pool);
            }
            return h;
        }

        void free() {
            all.forEach(cuda::free);
        }
    }

    /** Frees the tensor maps (the weights belong to the caller). */
    void close() {
        weightMaps.values().forEach(cuda::free);
        weightMaps.clear();
    }

    /** One line per epilogue and weight shape: where the paired kernel runs, and the timings behind it. */
    List<String> choices() {
        return List.copyOf(choices);
    }
}

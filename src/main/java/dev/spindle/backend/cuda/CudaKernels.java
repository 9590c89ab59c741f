package dev.spindle.backend.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static dev.spindle.backend.cuda.AttentionKernels.ATTENTION_KERNELS;
import static dev.spindle.backend.cuda.AttentionKernels.HOPPER_PREFILL;
import static dev.spindle.backend.cuda.AttentionKernels.PREFILL_WARP_PAIRS;
import static dev.spindle.backend.cuda.AttentionKernels.attentionSharedBytes;
import static dev.spindle.backend.cuda.AttentionKernels.attentionThreads;
import static dev.spindle.backend.cuda.AttentionKernels.hasWgmmaPrefill;

/**
 * The kernels of the fatbin resource (src/main/cuda, one stem per kernel), loaded into
 * the current context, with their launch rules (see each .cu file's header comment and
 * the kernel contract in docs/KERNELS.md). Launches are asynchronous, in stream order.
 */
public final class CudaKernels {
    private final CudaDriver cuda;
    private final MemorySegment feedTokens, embed, rmsNorm, addRmsNorm, rope, ropeKvWrite, swiglu, residualAdd, kvWrite, attentionMerge, attentionMergeWide, argmax, sample,
            fillDummy, allReduceSum;
    private final Map<Integer, MemorySegment> attention = new HashMap<>();
    /** The variants whose shared memory this device allows, with their functions. */
    private final Map<LinearRowsVariant, MemorySegment> linearRows = new LinkedHashMap<>();
    /** The paired twins (linear_rows_paired_...) among them ({@link LinearRowsVariant#hasPairedTwin}). */
    private final Map<LinearRowsVariant, MemorySegment> pairedRows = new LinkedHashMap<>();

    /** Which kernels this module holds and runs. */
    private final KernelSet set;

    private CudaKernels(CudaDriver cuda, byte[] fatbin, KernelSet set) {
        this.cuda = cuda;
        this.set = set;
        MemorySegment module = cuda.loadModule(fatbin);
        embed = cuda.function(module, "embed");
        feedTokens = cuda.function(module, "feed_tokens");
        rmsNorm = cuda.function(module, "rms_norm");
        addRmsNorm = cuda.function(module, "add_rms_norm");
        rope = cuda.function(module, "rope");
        ropeKvWrite = cuda.function(module, "rope_kv_write");
        swiglu = cuda.function(module, "swiglu");
        residualAdd = cuda.function(module, "residual_add");
        allReduceSum = cuda.function(module, "all_reduce_sum");
        kvWrite = cuda.function(module, "kv_write");
        int[] cc = cuda.computeCapability();
        boolean hopper = cc[0] == 9 && cc[1] == 0 && set == KernelSet.FULL;
        for (int hd : new int[]{16, 32, 64, 128}) {
            for (int phase = 0; phase < ATTENTION_KERNELS.size(); phase++) {
                if (HOPPER_PREFILL.contains(phase) && !(hopper && hasWgmmaPrefill(hd))) {
                    continue; // built for sm_90a only (elsewhere their bodies trap)
                }
                String name = "attention_hd" + hd + "_" + ATTENTION_KERNELS.get(phase);
                MemorySegment f = cuda.function(module, name);
                try {
                    cuda.allowSharedMemory(f, attentionSharedBytes(hd, phase));
                } catch (CudaException e) {
                    // the driver refuses more dynamic shared memory than the block may have beside the kernel's static
                    // shared memory: warp pairs (96 KiB + 12.5 KiB static) exceed the 99 KiB a block of sm_86/sm_89/sm_120
                    // GPUs, whose prefill then runs one warp per row group (the same values); the other kernels must fit
                    if (phase == PREFILL_WARP_PAIRS) {
                        continue;
                    }
                    throw new CudaException(name + " needs " + attentionSharedBytes(hd, phase) + " bytes of dynamic shared memory and this GPU allows "
                            + cuda.maxSharedMemory() + " a block: " + e.getMessage());
                }
                attention.put(attentionKey(hd, phase), f);
            }
        }
        for (LinearRowsVariant v : hopper ? LinearRowsVariant.ALL : List.<LinearRowsVariant>of()) {
            if (v.sharedBytes() <= cuda.maxSharedMemory()) {
                MemorySegment f = cuda.function(module, v.kernel());
                cuda.allowSharedMemory(f, v.sharedBytes());
                linearRows.put(v, f);
                if (v.hasPairedTwin()) {
                    MemorySegment pf = cuda.function(module, v.pairedKernel());
                    cuda.allowSharedMemory(pf, v.sharedBytes());
                    pairedRows.put(v, pf);
                }
            }
        }
        fp8 = new Fp8Kernels(cuda, module, hopper);
        exl3 = new Exl3Kernels(cuda, module);
        expand = new ExpandKernels(cuda, module);
        attentionMerge = cuda.function(module, "attention_merge");
        attentionMergeWide = cuda.function(module, "attention_merge_wide");
        cuda.allowSharedMemory(attentionMergeWide, MERGE_WIDE_BYTES);
        argmax = cuda.function(module, "argmax");
        sample = cuda.function(module, "sample");
        fillDummy = cuda.function(module, "fill_dummy");
        draft = new DraftHeadKernels(cuda, module);
    }

    private final DraftHeadKernels draft;

    /** The DFlash heads' kernels (draft_head.cu). */
    public DraftHeadKernels draft() {
        return draft;
    }
    private final Fp8Kernels fp8;
    private final Exl3Kernels exl3;
    private final ExpandKernels expand;

    /** The expansion kernels of ggml blocks, MLX affine and NVFP4. */
    public ExpandKernels expand() {
        return expand;
    }

    /** The EXL3 kernels. */
    public Exl3Kernels exl3() {
        return exl3;
    }

    /** The fp8 weight kernels. */
    public Fp8Kernels fp8() {
        return fp8;
    }

    /** The kernels on device 0, if this build has them (nvcc was present) and a GPU is here. */
    public static Optional<CudaKernels> load() {
        return load(0);
    }

    /** The kernels on device {@code ordinal} (the module loaded into its primary context), if this build has them and the device is here. */
    public static Optional<CudaKernels> load(int ordinal) {
        return load(ordinal, 0);
    }

    /** The kernels on lane {@code lane} of device {@code ordinal} ({@link CudaDriver#device(int, int)}): they launch on that lane's stream. */
    public static Optional<CudaKernels> load(int ordinal, int lane) {
        return load(ordinal, lane, KernelSet.FULL);
    }

    /** As {@link #load(int, int)}, the kernels of {@code set}. */
    public static synchronized Optional<CudaKernels> load(int ordinal, int lane, KernelSet set) {
        return loaded.computeIfAbsent(List.of(ordinal, lane, set.ordinal()), key -> read(ordinal, lane, set));
    }

    /** A module is loaded once per device lane and kernel set into the device's primary context; every pass on that lane shares it. */
    private static final Map<List<Integer>, Optional<CudaKernels>> loaded = new HashMap<>();

    private static Optional<CudaKernels> read(int ordinal, int lane, KernelSet set) {
        Optional<CudaDriver> cuda = CudaDriver.device(ordinal, lane);
        if (cuda.isEmpty()) {
            return Optional.empty();
        }
        try (InputStream in = CudaKernels.class.getResourceAsStream(set.resource)) {
            if (in == null) {
                return Optional.empty();
            }
            return Optional.of(new CudaKernels(cuda.get(), in.readAllBytes(), set));
        } catch (IOException e) {
            throw new CudaException("cannot read the fatbin resource: " + e.getMessage());
        }
    }

    /** Why {@link #load()} is empty here, for skip messages and startup errors. */
    public static String unavailableReason() {
        return unavailableReason(KernelSet.FULL);
    }

    /** Why the kernels of {@code set} cannot load here. */
    public static String unavailableReason(KernelSet set) {
        if (CudaDriver.get().isEmpty()) {
            return "no CUDA driver or GPU on this machine";
        }
        return CudaKernels.class.getResource(set.resource) == null
                ? "this build has no " + (set == KernelSet.PORTABLE ? "portable " : "") + "CUDA kernels (" + set.resource.substring(1)
                + "; nvcc was not on the PATH when it was built)" : "available";
    }

    public CudaDriver driver() {
        return cuda;
    }

    /**
     * Whether launches may use programmatic dependent launch: the full set's kernels wait for the kernel before them
     * (common.cuh's dependent_launch_entry on sm_90+); the portable ones are compiled for sm_80, where that wait is compiled
     * out, so they must be launched the ordinary way.
     */
    public boolean dependentLaunches() {
        return set == KernelSet.FULL;
    }

    /** Which kernels run: the full set, or the portable ones ({@link KernelSet}). */
    public KernelSet set() {
        return set;
    }

    static int grid(long n) {
        return (int) Math.max(1, Math.min(8192, (n + 255) / 256));
    }

    /**
     * A step's token slots fed from the previous step's draws: for each of the {@code n} pairs at {@code meta + 4 * pairs}
     * (token slot, logit row), meta[slot] = drawn[row], an id outside [0, vocab) written as 0 (see feed_tokens.cu).
     */
    public void feedTokens(long meta, int pairs, int n, long drawn, int vocab) {
        cuda.launch(feedTokens, Math.ceilDiv(n, 128), 1, 128, meta, pairs, n, drawn, vocab);
    }

    /** out (rows, width) = table[indices]: the embedding lookup, and any row gather. */
    public void embed(long indices, long table, long out, int rows, int width) {
        cuda.launch(embed, rows, 1, 256, indices, table, out, rows, width);
    }

    /** out = rmsnorm(x) * w, per row of width. */
    public void rmsNorm(long x, long w, long out, int rows, int width, float eps) {
        cuda.launch(rmsNorm, rows, 1, 256, x, w, out, rows, width, eps);
    }

    /** x = bf16(x + y); out = rmsnorm(x) * w. */
    public void addRmsNorm(long x, long y, long w, long out, int rows, int width, float eps) {
        cuda.launch(addRmsNorm, rows, 1, 256, x, y, w, out, rows, width, eps);
    }

    /** Rotates the first {@code heads} head vectors of each row (row stride {@code stride}) at its position. */
    public void rope(long x, int stride, long cos, long sin, long positions, int rows, int heads, int headDim) {
        int headsPerCta = 128 / (headDim / 4);
        cuda.launch(rope, rows, (heads + headsPerCta - 1) / headsPerCta, 128, x, stride, cos, sin, positions, rows, heads, headDim);
    }

    /**
     * rope on the q and k heads of each qkv row, then its k and v into the pool at slotMap[row]
     * (one launch, the same bits as {@link #rope} then {@link #kvWrite}).
     */
    public void ropeKvWrite(long qkv, int stride, long cos, long sin, long positions, int rows, int qHeads, int kvHeads, int headDim,
                            long pool, long slotMap, int blockSize) {
        int headsPerCta = 128 / (headDim / 4), heads = qHeads + 2 * kvHeads;
        cuda.launch(ropeKvWrite, rows, (heads + headsPerCta - 1) / headsPerCta, 128, qkv, stride, cos, sin, positions, rows, qHeads, kvHeads,
                headDim, pool, slotMap, blockSize);
    }

    /** out (rows, width) = silu(gate) * up from the fused (rows, 2 width) gate|up rows. */
    public void swiglu(long gateUp, long out, long rows, int width) {
        int perThread = width % 8 == 0 ? 8 : 1;
        cuda.launch(swiglu, (width / perThread + 255) / 256, (int) Math.min(rows, 65535), 256, gateUp, out, (int) rows, width);
    }

    /** x += y over n elements. */
    public void residualAdd(long x, long y, long n) {
        residualSum(x, x, y, n);
    }

    /** dst = x + y over n bf16 elements (one rounding, as residualAdd's). */
    public void residualSum(long dst, long x, long y, long n) {
        cuda.launch(residualAdd, grid(n), 1, 256, dst, x, y, n);
    }

    /** Ranks an {@link #allReduceSum} adds at most (all_reduce.cu's pointer arguments). */
    public static final int MAX_RANKS = 8;

    /**
     * out = bf16(partials[0] + partials[1] + ...) over n elements: the ranks' fp32 partials (device addresses this
     * device can read: its own, or a peer's with peer access on) added in rank order, rounded once.
     */
    public void allReduceSum(long out, long[] partials, long n) {
        if (partials.length < 1 || partials.length > MAX_RANKS) {
            throw new IllegalArgumentException(partials.length + " partials; all_reduce_sum adds 1 to " + MAX_RANKS);
        }
        Object[] args = new Object[3 + MAX_RANKS];
        args[0] = out;
        args[1] = partials.length;
        args[2] = n;
        for (int r = 0; r < MAX_RANKS; r++) {
            args[3 + r] = r < partials.length ? partials[r] : 0L;
        }
        cuda.launch(allReduceSum, grid(n), 1, 256, args);
    }

    /** K and V of each qkv row into the pool at slotMap[row]. */
    public void kvWrite(long qkv, int stride, int qDim, int kvDim, int headDim, long pool, long slotMap, int blockSize, int rows) {
        cuda.launch(kvWrite, rows, 1, 128, qkv, stride, qDim, kvDim, headDim, pool, slotMap, blockSize, rows);
    }

    /** The loaded attention kernels' key: head dim and kind (a kind below 16: {@link AttentionKernels#ATTENTION_KERNELS}). */
    private static int attentionKey(int headDim, int phase) {
        return headDim * 16 + phase;
    }

    /** Whether the attention kernel of {@code phase} for {@code headDim} is loaded (its shared memory fits this GPU). */
    public boolean hasAttention(int headDim, int phase) {
        return attention.containsKey(attentionKey(headDim, phase));
    }


    /**
     * Paged causal attention for {@code ctas} CTA descriptors (8 ints each, see attention.cu): one of
     * {@link AttentionKernels#PREFILL_KERNELS} for prefill tiles (out written); {@link AttentionKernels#DECODE} for decode rows' split CTAs
     * (split states to partO and partML, folded into out by {@link #attentionMerge}).
     */
    public void attention(int phase, int ctas, long qkv, int stride, long out, long pool, long tables, long desc, long partO, long partML,
                          int heads, int kvHeads, int headDim, int blockSize, float scale) {
        MemorySegment f = attention.get(attentionKey(headDim, phase));
        if (f == null) {
            throw new IllegalStateException("attention_hd" + headDim + "_" + ATTENTION_KERNELS.get(phase) + " is not loaded on this GPU (shared memory)");
        }
        cuda.launchShared(f, ctas, kvHeads, attentionThreads(phase),
                attentionSharedBytes(headDim, phase, heads / kvHeads), qkv, stride, out,
                pool, tables, desc, partO, partML, heads, kvHeads, blockSize, scale);
    }

    /**
     * y (n, nOut) = bf16(x (n, k) @ W^T) for n <= v.rows() rows, k % v.keys() == 0: one fp32 accumulator per output fed
     * k's 16-wide chunks in order (the bits of cuBLASLt's split-free algorithms; see linear_rows.cu). mapX and
     * mapW: device tensor maps ({@link TensorMaps#bf16}) of x (box v.rows() x 64) and W (box v.weightRows() x 64).
     */
    public void linearRows(LinearRowsVariant v, long mapX, int n, int k, long mapW, int nOut, long y) {
        MemorySegment f = linearRows.get(v);
        if (f == null || n < 1 || n > v.rows() || k % v.keys() != 0) {
            throw new IllegalArgumentException(v.kernel() + (f == null ? " is not available on this device" : " takes 1 to " + v.rows()
                    + " rows and k a multiple of " + v.keys() + ", not " + n + " rows, k " + k));
        }
        cuda.launchShared(f, (nOut + v.weightRows() - 1) / v.weightRows(), 1, 128, v.sharedBytes(), mapX, n, k, mapW, nOut, y);
    }

    /**
     * The paired twin of variant v: y as {@link #linearRows} then epilogue e's kernel would leave it (for SwiGLU: the
     * (n, width) output, gate|up not written; for rope_kv_write: the rotated qkv rows and the pool), bit for bit, in one
     * launch (linear_rows.cu). mapW: W's tensor map with a box of 32 rows x 64 (each CTA reads two 32-row halves).
     */
    public void linearRowsPaired(LinearRowsVariant v, long mapX, int n, int k, long mapW, int nOut, long y, PairedEpilogue e) {
        MemorySegment f = pairedRows.get(v);
        if (f == null || n < 1 || n > v.rows() || k % v.keys() != 0 || nOut != e.outputs()) {
            throw new IllegalArgumentException(v.pairedKernel() + (f == null ? " is not available on this device" : " takes 1 to " + v.rows()
                    + " rows, k a multiple of " + v.keys() + " and the epilogue's " + e.outputs() + " outputs, not " + n + " rows, k " + k
                    + ", " + nOut + " outputs"));
        }
        int ctas = nOut / 64, shared = v.sharedBytes();
        switch (e) {
            case PairedEpilogue.Swiglu s -> cuda.launchShared(f, ctas, 1, 128, shared, mapX, n, k, mapW, nOut, y, 1, 1, 32, s.width(),
                    0L, 0L, 0L, 0, 0, 64, 0L, 0L, 1);
            case PairedEpilogue.RopeKvWrite r -> cuda.launchShared(f, ctas, 1, 128, shared, mapX, n, k, mapW, nOut, y, 2, r.headDim() / 64,
                    r.headDim(), r.headDim() / 2, r.cos(), r.sin(), r.positions(), r.qHeads(), r.kvHeads(), r.headDim(), r.pool(), r.slotMap(),
                    r.blockSize());
        }
    }

    /** The linear_rows variants whose paired twins this device runs (up to 8 rows). */
    public List<LinearRowsVariant> pairedRowsVariants() {
        return List.copyOf(pairedRows.keySet());
    }

    /** The linear_rows variants this device runs. */
    public List<LinearRowsVariant> linearRowsVariants() {
        return List.copyOf(linearRows.keySet());
    }

    /** attention.cu's merge stages: a warp's (CHUNK, STAGES) in attention_merge (16, 4), MERGE_WARP_BYTES. */
    static final int MERGE_WARP_BYTES = 4 * 16 * (32 * 4 + 8) + 512;
    /** attention_merge_wide's stages (MERGE_WIDE_BYTES): 4 of 32 splits of 128 dims and their (m, l), then the factor table. */
    static final int MERGE_WIDE_BYTES = 4 * 32 * (128 * 4 + 8) + 512;
    /** Split states a decode row has from which {@link #attentionMerge} runs attention_merge_wide (4,096 keys). */
    static final int WIDE_MERGE_SPLITS = 32;
    /** The merge kernels: attention_merge (a CTA per row and head, a warp per 32 dims), attention_merge_wide (a warp per 128 dims, four a lane). */
    static final int MERGE = 0, MERGE_WIDE = 1;

    /**
     * Folds decode rows' split states (partO, partML; row descriptors cdesc) in split order into out: for rows of
     * {@code splits} >= {@link #WIDE_MERGE_SPLITS} split states a warp per row, query head and 128 dims
     * (attention_merge_wide; every head dim the attention kernels are built for is a multiple of 4), else a warp per
     * row, query head and slice of 32 dims in one CTA per row and head. Both give the same bits.
     */
    public void attentionMerge(int rows, int splits, long partO, long partML, long cdesc, long out, int heads, int headDim) {
        attentionMergeBy(splits >= WIDE_MERGE_SPLITS ? MERGE_WIDE : MERGE, rows, partO, partML, cdesc, out, heads, headDim);
    }

    /** {@link #attentionMerge} through the given merge kernel ({@link #MERGE} or {@link #MERGE_WIDE}). */
    void attentionMergeBy(int kernel, int rows, long partO, long partML, long cdesc, long out, int heads, int headDim) {
        switch (kernel) {
            case MERGE_WIDE -> cuda.launchShared(attentionMergeWide, rows, heads * ((headDim + 127) / 128), 32, MERGE_WIDE_BYTES, partO, partML, cdesc, out, heads, headDim);
            case MERGE -> {
                int slices = (headDim + 31) / 32;
                cuda.launchShared(attentionMerge, rows, heads, 32 * slices, slices * MERGE_WARP_BYTES, partO, partML, cdesc, out, heads, headDim);
            }
            default -> throw new IllegalArgumentException("no merge kernel " + kernel);
        }
    }

    /** out[r] = argmax of logits row r (first among equals). */
    public void argmax(long logits, int rows, int vocab, long out) {
        cuda.launch(argmax, rows, 1, 1024, logits, rows, vocab, out);
    }

    /**
     * Draws each of {@code rows} logits rows' token by the engine's sampling rule (see sample.cu);
     * params: five doubles per row (temperature, top-k, top-p, min-p, u; temperature < 0 skips the
     * row); scratch: rows x vocab fp32.
     */
    public void sample(long logits, int rows, int vocab, long params, long scratch, long out) {
        cuda.launch(sample, rows, 1, 1024, logits, rows, vocab, params, scratch, out);
    }

    /** Seeded uniform bf16 values center + scale * [-1, 1) over n elements. */
    public void fillDummy(long p, long n, long seed, float center, float scale) {
        cuda.launch(fillDummy, grid(n), 1, 256, p, n, seed, center, scale);
    }
}

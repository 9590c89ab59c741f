package dev.spindle.backend.cuda;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The fp8 kernels. Weights (fp8.cu, linear_rows.cu's fp8 twins): quantizing bf16 on the device as the host's
 * {@link dev.spindle.model.Fp8Quantizer} does, expanding an fp8 weight to the bf16 values every linear layer reads
 * ({@code bf16(decode(q) * scale)}), and the few-row GEMMs (sm_90a): the wgmma twins that expand a stage in shared memory,
 * and the mma.sync ones that take the codes into the MMA's registers. The KV cache
 * (--kv-cache-dtype fp8): rope_kv_write's twin that stores E4M3 records, and the attention kernels' twins that read them
 * (attention.cu's _kv8: prefill, decode and warp-pair prefill; the wgmma prefill kernels read bf16 only).
 */
public final class Fp8Kernels {
    private final CudaDriver cuda;
    private final MemorySegment quantize, dequant, ropeKvWrite;
    /** The fp8-KV attention kernels this device loads, by head dim * 16 + kind. */
    private final Map<Integer, MemorySegment> attention = new java.util.HashMap<>();
    /** The attention kinds with fp8-KV twins. */
    static final List<Integer> KV8_KINDS = List.of(AttentionKernels.PREFILL, AttentionKernels.DECODE, AttentionKernels.PREFILL_WARP_PAIRS);
    /** The fp8 twins of the linear_rows variants whose shared memory this device allows (sm_90a only). */
    private final Map<LinearRowsVariant, MemorySegment> rows = new LinkedHashMap<>();

    Fp8Kernels(CudaDriver cuda, MemorySegment module, boolean hopper) {
        this.cuda = cuda;
        quantize = cuda.function(module, "quantize_fp8");
        dequant = cuda.function(module, "dequant_fp8");
        ropeKvWrite = cuda.function(module, "rope_kv_write_kv8");
        for (int hd : new int[]{16, 32, 64, 128}) {
            for (int kind : KV8_KINDS) {
                MemorySegment f = cuda.function(module, "attention_hd" + hd + "_" + AttentionKernels.ATTENTION_KERNELS.get(kind) + "_kv8");
                try {
                    cuda.allowSharedMemory(f, AttentionKernels.attentionSharedBytes(hd, kind));
                } catch (CudaException e) {
                    if (kind == AttentionKernels.PREFILL_WARP_PAIRS) {
                        continue; // as for bf16: more than a block of sm_86/sm_89/sm_120 may have
                    }
                    throw e;
                }
                attention.put(hd * 16 + kind, f);
            }
        }
        List<LinearRowsVariant> all = new java.util.ArrayList<>(LinearRowsVariant.ALL);
        all.addAll(LinearRowsVariant.FP8_MMA);
        for (LinearRowsVariant v : hopper ? all : List.<LinearRowsVariant>of()) {
            if (v.fp8SharedBytes() <= cuda.maxSharedMemory()) {
                MemorySegment f = cuda.function(module, v.fp8Kernel());
                cuda.allowSharedMemory(f, v.fp8SharedBytes());
                rows.put(v, f);
            }
        }
    }

    /**
     * src (rows, cols) bf16 into w's codes and scales (w.rows() x w.cols(), its blocks), as the host quantizer: a block's scale
     * its largest magnitude over 448 (1 for zeros), each value encode(x / scale).
     */
    public void quantize(long src, DeviceMatrix.Fp8 w) {
        int gx = Math.ceilDiv(w.cols(), w.blockCols()), gy = Math.ceilDiv(w.rows(), w.blockRows());
        cuda.launch(quantize, gx, gy, 256, src, w.rows(), w.cols(), w.blockRows(), w.blockCols(), w.data(), w.scales());
    }

    /** out (rows, cols) bf16 = the values w stands for, bf16(decode(q) * scale); cols a multiple of 8. */
    public void dequant(DeviceMatrix.Fp8 w, long out) {
        if (w.cols() % 8 != 0) {
            throw new IllegalArgumentException("dequant_fp8 takes 8 columns at a time; " + w.cols() + " columns");
        }
        long n8 = (long) w.rows() * w.cols() / 8;
        int grid = (int) Math.max(1, Math.min(8192, (n8 + 255) / 256));
        cuda.launch(dequant, grid, 1, 256, w.data(), w.scales(), w.rows(), w.cols(), w.blockRows(), w.blockCols(), out);
    }

    /**
     * y (n, nOut) = bf16(x (n, k) @ W^T) over fp8 weight w through the fp8 variant v (the bits of cuBLASLt over
     * {@link #dequant}'s expansion; linear_rows.cu, linear_rows_fp8_mma.cu). mapW: {@link TensorMaps#u8} of w's codes, box
     * v.weightRows() x 64 ({@link TensorMaps#u8Swizzled} for an mma variant).
     */
    public void linearRows(LinearRowsVariant v, long mapX, int n, long mapW, DeviceMatrix.Fp8 w, long y) {
        MemorySegment f = rows.get(v);
        int k = w.cols();
        if (f == null || n < 1 || n > v.rows() || k % v.keys() != 0 || !takes(v, w)) {
            throw new IllegalArgumentException(v.fp8Kernel() + (f == null ? " is not available on this device" : " takes 1 to " + v.rows()
                    + " rows, k a multiple of " + v.keys() + " and column blocks of a multiple of " + (v.mma() ? v.keys() : 16)
                    + ", not " + n + " rows, k " + k + ", blocks of " + w.blockCols()));
        }
        cuda.launchShared(f, Math.ceilDiv(w.rows(), v.weightRows()), 1, v.threads(), v.fp8SharedBytes(), mapX, n, k, mapW, w.rows(), y,
                w.scales(), w.blockRows(), w.blockCols());
    }

    /** Whether the fp8-KV twin of attention kind {@code kind} is loaded for {@code headDim}. */
    public boolean hasAttention(int headDim, int kind) {
        return attention.containsKey(headDim * 16 + kind);
    }

    /** {@link CudaKernels#attention} over an fp8 pool (rope_kv_write_kv8's records): the same values' arithmetic, attention.cu. */
    public void attention(int kind, int ctas, long qkv, int stride, long out, long pool, long tables, long desc, long partO, long partML,
                          int heads, int kvHeads, int headDim, int blockSize, float scale) {
        MemorySegment f = attention.get(headDim * 16 + kind);
        if (f == null) {
            throw new IllegalStateException("attention_hd" + headDim + "_" + AttentionKernels.ATTENTION_KERNELS.get(kind) + "_kv8 is not loaded on this GPU");
        }
        cuda.launchShared(f, ctas, kvHeads, AttentionKernels.attentionThreads(kind), AttentionKernels.attentionSharedBytes(headDim, kind, heads / kvHeads),
                qkv, stride, out, pool, tables, desc, partO, partML, heads, kvHeads, blockSize, scale);
    }

    /**
     * {@link CudaKernels#ropeKvWrite} into an fp8 pool: K and V head vectors stored as E4M3 codes and a bf16 scale each
     * (backend.KvCodec's values; rope_kv_write.cu's layout).
     */
    public void ropeKvWrite(long qkv, int stride, long cos, long sin, long positions, int rows, int qHeads, int kvHeads, int headDim,
                            long pool, long slotMap, int blockSize) {
        int headsPerCta = 128 / (headDim / 4), heads = qHeads + 2 * kvHeads;
        cuda.launch(ropeKvWrite, rows, (heads + headsPerCta - 1) / headsPerCta, 128, qkv, stride, cos, sin, positions, rows, qHeads, kvHeads,
                headDim, pool, slotMap, blockSize);
    }

    /** Whether the few-row kernels take w's scale blocks: 16 codes a thread share one scale. */
    static boolean takes(DeviceMatrix.Fp8 w) {
        return w.blockCols() % 16 == 0 || w.blockCols() >= w.cols();
    }

    /** Whether variant v takes w's scale blocks: 16 codes share one (wgmma twins), a stage's keys do (mma variants). */
    static boolean takes(LinearRowsVariant v, DeviceMatrix.Fp8 w) {
        return w.blockCols() >= w.cols() || w.blockCols() % (v.mma() ? v.keys() : 16) == 0;
    }

    /** The variants whose fp8 kernels this device runs. */
    public List<LinearRowsVariant> variants() {
        return List.copyOf(rows.keySet());
    }

    /** Those of them that take w's scale blocks. */
    public List<LinearRowsVariant> variants(DeviceMatrix.Fp8 w) {
        return rows.keySet().stream().filter(v -> takes(v, w)).toList();
    }
}

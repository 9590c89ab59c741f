package dev.spindle.backend.cuda;

import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.MlxMatrix;
import dev.spindle.model.Exl3Matrix;
import dev.spindle.model.Nvfp4Matrix;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadListener;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.model.Quantization;
import dev.spindle.model.Tensor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * A model's weights in device memory as the host holds them (the bf16 release as published, or fp8 codes and scales),
 * with two fusions of layout only: q|k|v stacked into one (Q + 2K, H) matrix and gate|up into one (2I, H),
 * so each is one GEMM. Uploaded by several threads, each through two pinned staging buffers
 * (see {@link WeightUploader}), or generated on the device for --load-format dummy.
 */
public final class CudaWeights implements AutoCloseable {
    /**
     * Threads that copy weights to the device at once (each with two 32 MiB pinned buffers): reading the
     * host mapping (the page cache) is the slow side of the copy, so it runs in parallel.
     */
    static final int UPLOAD_THREADS = Math.max(1, Math.min(8, Runtime.getRuntime().availableProcessors()));

    /**
     * One layer's weights on the device: the norms' addresses ((H) bf16), the linear layers in their formats: q|k|v
     * (Q + 2K, H), o (H, Q), gate|up (2I, H), down (H, I); a tensor-parallel rank's rows or columns of them.
     */
    public record Layer(long inputNorm, DeviceMatrix qkv, DeviceMatrix o, long postAttnNorm, DeviceMatrix gateUp, DeviceMatrix down) {
    }

    final CudaDriver cuda;
    private final List<Long> allocations = new ArrayList<>();
    private final List<Layer> layers = new ArrayList<>();
    private long embedding, finalNorm;
    private DeviceMatrix lmHead;
    private long bytes;
    private double seconds;

    private CudaWeights(CudaDriver cuda) {
        this.cuda = cuda;
    }

    long alloc(long bytes) {
        long p = cuda.alloc(bytes);
        allocations.add(p);
        this.bytes += bytes;
        return p;
    }

    /** Uploads host weights (mapped safetensors or converted) to the device. */
    public static CudaWeights upload(CudaDriver cuda, ModelConfig c, ModelWeights w, LoadListener listener) {
        return upload(cuda, c, w, listener, TensorParallelLayout.of(c, 1), 0, true);
    }

    /**
     * Uploads tensor-parallel rank {@code rank}'s share of the host weights ({@link dev.spindle.backend.TensorParallelLayout}):
     * its rows of q, k, v, gate and up (fused as at one rank), its columns of o_proj and down_proj (gathered row by row by
     * the copies), the norms and the embedding whole, and the head only where {@code head} (the rank that computes the
     * logits). At one rank: every weight whole, as published.
     */
    public static CudaWeights upload(CudaDriver cuda, ModelConfig c, ModelWeights w, LoadListener listener,
                                     TensorParallelLayout tp, int rank, boolean head) {
        if (tp.ranks() > 1 && !(w.layers().getFirst().q() instanceof Bf16Matrix)) {
            Matrix f = w.layers().getFirst().q();
            throw new CudaException(f.name() + " is " + f.format() + ": the CUDA backend splits only bf16 weights over tensor-parallel ranks so far;"
                    + " serve it at --tensor-parallel-size 1");
        }
        return build(cuda, out -> {
            int h = c.hiddenSize(), qd = tp.qDim(), kvd = tp.kvDim(), in = tp.intermediate();
            try (Arena scratch = Arena.ofShared()) {
                WeightUploader up = new WeightUploader(cuda, listener);
                out.embedding = up.put(out.alloc(w.embedding().data().byteSize()), w.embedding());
                for (LayerWeights l : w.layers()) {
                    DeviceMatrix qkv = out.stackRows(up, scratch, List.of(new RowSlice(l.q(), tp.qStart(rank), qd),
                            new RowSlice(l.k(), tp.kvStart(rank), kvd), new RowSlice(l.v(), tp.kvStart(rank), kvd)));
                    DeviceMatrix gateUp = out.stackRows(up, scratch, List.of(new RowSlice(l.gate(), tp.intermediateStart(rank), in),
                            new RowSlice(l.up(), tp.intermediateStart(rank), in)));
                    DeviceMatrix o = out.columns(up, l.o(), tp.qStart(rank), qd);
                    DeviceMatrix down = out.columns(up, l.down(), tp.intermediateStart(rank), in);
                    out.layers.add(new Layer(up.put(out.alloc(l.inputNorm().data().byteSize()), l.inputNorm()), qkv, o,
                            up.put(out.alloc(l.postAttnNorm().data().byteSize()), l.postAttnNorm()), gateUp, down));
                }
                out.finalNorm = up.put(out.alloc(w.finalNorm().data().byteSize()), w.finalNorm());
                if (head && w.lmHead() instanceof Exl3Matrix e && !w.headIsEmbedding()) {
                    out.lmHead = out.exl3(up, List.of(e));
                } else if (head && expandable(w.lmHead()) && !w.headIsEmbedding()) {
                    out.lmHead = new DeviceMatrix.Expanded(List.of(out.expandable(up, w.lmHead())), c.vocabSize(), h);
                } else if (head) {
                    Tensor lm = bf16(w.lmHead());
                    long at = w.headIsEmbedding() ? out.embedding : up.put(out.alloc(lm.data().byteSize()), lm);
                    out.lmHead = new DeviceMatrix.Bf16(at, c.vocabSize(), h);
                }
                up.run(UPLOAD_THREADS);
                cuda.sync();
            }
        });
    }

    /** Rows [first, first + count) of a host weight: its share in a fused matrix. */
    private record RowSlice(Matrix m, int first, int count) {
    }

    /**
     * The slices stacked into one device matrix (q|k|v, gate|up), in their format: bf16 rows copied to their offsets; fp8
     * codes likewise, and their scales stacked where every slice's rows fill whole scale blocks of the same shape, else
     * written out a row at a time (blockRows 1: the same value for each element). Mixed formats are refused.
     */
    private DeviceMatrix stackRows(WeightUploader up, Arena scratch, List<RowSlice> slices) {
        int rows = slices.stream().mapToInt(RowSlice::count).sum(), cols = slices.getFirst().m().cols();
        if (slices.stream().allMatch(s -> s.m() instanceof Bf16Matrix)) {
            long at = alloc(2L * rows * cols), off = at;
            for (RowSlice s : slices) {
                up.putRows(off, ((Bf16Matrix) s.m()).data(), s.first(), s.count());
                off += 2L * s.count() * cols;
            }
            return new DeviceMatrix.Bf16(at, rows, cols);
        }
        if (slices.stream().allMatch(s -> s.m() instanceof Exl3Matrix)) {
            for (RowSlice s : slices) {
                if (s.first() != 0 || s.count() != s.m().rows()) {
                    throw wholeOnly(s.m());
                }
            }
            return exl3(up, slices.stream().map(s -> (Exl3Matrix) s.m()).toList());
        }
        if (slices.stream().allMatch(s -> expandable(s.m()))) {
            List<ExpandKernels.Part> parts = new ArrayList<>();
            for (RowSlice s : slices) {
                parts.add(expandable(up, s.first() == 0 && s.count() == s.m().rows() ? s.m() : s.m().rows(s.first(), s.count())));
            }
            return new DeviceMatrix.Expanded(parts, rows, cols);
        }
        if (!slices.stream().allMatch(s -> s.m() instanceof Fp8Matrix)) {
            throw new CudaException(slices.stream().map(s -> s.m().name() + " is " + s.m().format()).collect(java.util.stream.Collectors.joining(", "))
                    + ": the CUDA backend fuses these into one matrix, so they must share one format");
        }
        List<Fp8Matrix> parts = slices.stream().map(s -> ((Fp8Matrix) s.m()).rows(s.first(), s.count())).toList();
        Fp8Stack stack = Fp8Stack.of(parts, scratch);
        long data = alloc((long) rows * cols), off = data;
        for (Fp8Matrix p : parts) {
            up.put(off, p.data());
            off += (long) p.rows() * cols;
        }
        long scales = alloc(stack.scaleBytes()), at = scales;
        for (Tensor t : stack.scales()) {
            up.put(at, t);
            at += t.data().byteSize();
        }
        return new DeviceMatrix.Fp8(data, scales, rows, cols, stack.blockRows(), stack.blockCols());
    }

    /** Device copies of tensors uploaded once though several matrices share them (a trellis holding more than one projection). */
    private final java.util.Map<java.util.List<Long>, Long> shared = new java.util.HashMap<>();

    /** A tensor on the device, uploaded the first time its host bytes are asked for. */
    private long once(WeightUploader up, Tensor t) {
        return shared.computeIfAbsent(java.util.List.of(t.data().address(), t.data().byteSize()), a -> up.put(alloc(t.data().byteSize()), t));
    }

    /** EXL3 projections stacked along the outputs: each its trellis, su and sv on the device (a shared trellis once). */
    private DeviceMatrix.Exl3 exl3(WeightUploader up, List<Exl3Matrix> parts) {
        List<Exl3Kernels.Weights> w = new ArrayList<>();
        for (Exl3Matrix m : parts) {
            w.add(Exl3Kernels.Weights.of(once(up, m.trellis()), once(up, m.su()), once(up, m.sv()), m));
        }
        return new DeviceMatrix.Exl3(w, parts.stream().mapToInt(Exl3Matrix::rows).sum(), parts.getFirst().cols());
    }

    /**
     * Columns [first, first + count) of a row-parallel weight (o_proj, down_proj): all of them at one rank. bf16 only at
     * several (refused before the upload for fp8).
     */
    private DeviceMatrix columns(WeightUploader up, Matrix m, int first, int count) {
        return switch (m) {
            case Bf16Matrix b -> new DeviceMatrix.Bf16(up.putColumns(alloc(2L * count * m.rows()), b.data(), first, count), m.rows(), count);
            case Fp8Matrix f -> {
                long data = up.put(alloc(f.data().data().byteSize()), f.data());
                long scales = up.put(alloc(f.scales().data().byteSize()), f.scales());
                yield new DeviceMatrix.Fp8(data, scales, f.rows(), f.cols(), f.blockRows(), f.blockCols());
            }
            case GgmlMatrix g when first == 0 && count == g.cols() -> new DeviceMatrix.Expanded(List.of(expandable(up, g)), g.rows(), g.cols());
            case MlxMatrix a when first == 0 && count == a.cols() -> new DeviceMatrix.Expanded(List.of(expandable(up, a)), a.rows(), a.cols());
            case Nvfp4Matrix a when first == 0 && count == a.cols() -> new DeviceMatrix.Expanded(List.of(expandable(up, a)), a.rows(), a.cols());
            case GgmlMatrix g -> throw wholeOnly(g);
            case MlxMatrix a -> throw wholeOnly(a);
            case Nvfp4Matrix a -> throw wholeOnly(a);
            case Exl3Matrix a when first == 0 && count == a.cols() -> exl3(up, List.of(a));
            case Exl3Matrix a -> throw wholeOnly(a);
        };
    }

    private static CudaException wholeOnly(Matrix m) {
        return new CudaException(m.name() + " is " + m.format() + ": the CUDA backend serves it whole (--tensor-parallel-size 1)");
    }

    /** Whether the CUDA backend reads m by expanding it to bf16 ({@link DeviceMatrix.Expanded}). */
    private static boolean expandable(Matrix m) {
        return m instanceof GgmlMatrix || m instanceof MlxMatrix || m instanceof Nvfp4Matrix;
    }

    /** An expandable host matrix's tensors on the device, as the expansion kernel's part. */
    private ExpandKernels.Part expandable(WeightUploader up, Matrix m) {
        return switch (m) {
            case GgmlMatrix g -> new ExpandKernels.Ggml(put(up, g.data()), g.rowBytes(), g.type().id, g.type().blockElements, g.type().blockBytes, g.rows(),
                    g.cols(), g.format());
            case MlxMatrix a -> new ExpandKernels.Mlx(put(up, a.data()), put(up, a.scales()), put(up, a.biases()), floatKind(a.scales(), a.biases()),
                    a.groupSize(), a.bits(), a.rows(), a.cols(), a.format());
            case Nvfp4Matrix f -> new ExpandKernels.Nvfp4(put(up, f.data()), put(up, f.scales()), f.global(), f.divides(), f.rows(), f.cols(), f.format());
            default -> throw new IllegalArgumentException(m.name() + " is " + m.format() + ", not a format the CUDA backend expands");
        };
    }

    private long put(WeightUploader up, Tensor t) {
        return up.put(alloc(t.data().byteSize()), t);
    }

    /** The expansion kernel's code for an MLX matrix's scale and bias dtype (0 bf16, 1 f16, 2 f32); both must share it. */
    private static int floatKind(Tensor scales, Tensor biases) {
        if (scales.dtype() != biases.dtype()) {
            throw new CudaException(scales.name() + " is " + scales.dtype() + " and " + biases.name() + " is " + biases.dtype()
                    + ": the CUDA backend reads an MLX matrix's scales and biases in one dtype");
        }
        return switch (scales.dtype()) {
            case BF16 -> 0;
            case F16 -> 1;
            case F32 -> 2;
            default -> throw new CudaException(scales.name() + " is " + scales.dtype() + ": MLX scales are bf16, f16 or f32");
        };
    }

    /** Fills new device weights with {@code fill}, timed; what was allocated is freed if it fails. */
    private static CudaWeights build(CudaDriver cuda, java.util.function.Consumer<CudaWeights> fill) {
        CudaWeights out = new CudaWeights(cuda);
        long t0 = System.nanoTime();
        try {
            fill.accept(out);
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        out.seconds = (System.nanoTime() - t0) / 1e9;
        return out;
    }

    /** Seeded random weights of the config's shapes, generated on the device (norms near 1, linear weights with variance 1/in). */
    public static CudaWeights dummy(CudaDriver cuda, CudaKernels k, ModelConfig c, long seed, LoadListener listener) {
        return dummy(cuda, k, c, seed, listener, true);
    }

    /** As {@link #dummy(CudaDriver, CudaKernels, ModelConfig, long, LoadListener)} for a config of one rank's shapes; no head unless {@code head}. */
    public static CudaWeights dummy(CudaDriver cuda, CudaKernels k, ModelConfig c, long seed, LoadListener listener, boolean head) {
        return dummy(cuda, k, c, seed, listener, head, Quantization.NONE);
    }

    /** As {@link #dummy(CudaDriver, CudaKernels, ModelConfig, long, LoadListener, boolean, DummyFormat)} with the linear layers quantized as q says. */
    public static CudaWeights dummy(CudaDriver cuda, CudaKernels k, ModelConfig c, long seed, LoadListener listener, boolean head, Quantization q) {
        return dummy(cuda, k, c, seed, listener, head, DummyFormat.of(q));
    }

    /**
     * As {@link #dummy(CudaDriver, CudaKernels, ModelConfig, long, LoadListener, boolean)}, the linear layers in {@code format}:
     * quantized on the device (as the host quantizer would quantize them: quantize_fp8), or EXL3 of random trellises (the
     * bench's); the embedding, norms and head bf16.
     */
    public static CudaWeights dummy(CudaDriver cuda, CudaKernels k, ModelConfig c, long seed, LoadListener listener, boolean head, DummyFormat format) {
        return build(cuda, out -> {
            int h = c.hiddenSize(), qd = c.qDim(), kv = c.kvDim(), in = c.intermediateSize();
            try (DummyFill f = new DummyFill(out, k, seed, c.parameterCount() * 2, listener, format,
                    format.quantization() == Quantization.NONE ? 0 : Math.max((long) (qd + 2 * kv) * h, Math.max(2L * in * h, (long) h * Math.max(qd, in))))) {
                out.embedding = f.fill(c.vocabSize(), h, 0f, 1f);
                for (int l = 0; l < c.numLayers(); l++) {
                    long norm1 = f.norm(h);
                    DeviceMatrix qkv = f.linear(h, qd, kv, kv);
                    DeviceMatrix o = f.linear(qd, h);
                    long norm2 = f.norm(h);
                    DeviceMatrix gateUp = f.linear(h, in, in);
                    DeviceMatrix down = f.linear(in, h);
                    out.layers.add(new Layer(norm1, qkv, o, norm2, gateUp, down));
                }
                out.finalNorm = f.norm(h);
                if (head) {
                    out.lmHead = new DeviceMatrix.Bf16(c.tiedEmbeddings() ? out.embedding : f.fill(c.vocabSize(), h, 0f, (float) Math.sqrt(3.0 / h)),
                            c.vocabSize(), h);
                }
                cuda.sync();
            }
        });
    }

    public Layer layer(int i) {
        return layers.get(i);
    }

    public long embedding() {
        return embedding;
    }

    public long finalNorm() {
        return finalNorm;
    }

    /** The output head (vocab, H); null on a tensor-parallel rank without it. */
    DeviceMatrix lmHead() {
        return lmHead;
    }

    /** The output head's bf16 data (quantization leaves the head bf16). */
    private static Tensor bf16(Matrix m) {
        return switch (m) {
            case Bf16Matrix b -> b.data();
            case Fp8Matrix f -> throw new CudaException(f.name() + " is " + f.format() + ": the CUDA backend reads the output head in bf16 only");
            case GgmlMatrix a -> throw new IllegalStateException(a.name() + ": a quantized head is uploaded in its format");
            case MlxMatrix a -> throw new IllegalStateException(a.name() + ": a quantized head is uploaded in its format");
            case Nvfp4Matrix a -> throw new IllegalStateException(a.name() + ": a quantized head is uploaded in its format");
            case Exl3Matrix a -> throw new IllegalStateException(a.name() + ": an EXL3 head is uploaded as EXL3");
        };
    }

    /** The linear layers' format as the start log names it (as {@link Matrix#format()} names the host's). */
    public String format() {
        return switch (layers.getFirst().qkv()) {
            case DeviceMatrix.Bf16 b -> "bf16";
            case DeviceMatrix.Fp8 f -> f.blockRows() == 1 && f.blockCols() >= f.cols() ? "fp8-e4m3 (per-row scales)"
                    : "fp8-e4m3 (" + f.blockRows() + "x" + f.blockCols() + " block scales)";
            case DeviceMatrix.Exl3 e -> e.parts().getFirst().format();
            case DeviceMatrix.Expanded e -> e.parts().getFirst().format();
        };
    }

    /**
     * Bytes of weights a decode step reads: every layer's norms and linear layers in their formats (fp8: codes and scales)
     * once per executed layer, the final norm and the head; not the embedding table, of which one row is read. The bf16
     * figure is {@link ModelConfig#decodeWeightBytes()}.
     */
    public long decodeBytes(ModelConfig c) {
        long stored = 0; // every stored layer once (their formats may differ: mixed EXL3 widths, a GGUF's Q4_K_M mix)
        for (Layer l : layers) {
            for (DeviceMatrix m : List.of(l.qkv(), l.o(), l.gateUp(), l.down())) {
                stored += bytesRead(m);
            }
            stored += 2L * 2 * c.hiddenSize();
        }
        long perLoop = stored * c.executedLayers() / layers.size(); // a looped model reads its layers once a loop
        return perLoop + 2L * c.hiddenSize() + (lmHead == null ? 0 : bytesRead(lmHead));
    }

    /** Bytes a decode step reads of a weight in its format (fp8: codes and scales; EXL3: trellis tiles and sign vectors). */
    private static long bytesRead(DeviceMatrix m) {
        return switch (m) {
            case DeviceMatrix.Bf16 b -> 2L * b.rows() * b.cols();
            case DeviceMatrix.Fp8 f -> (long) f.rows() * f.cols() + 4L * Math.ceilDiv(f.rows(), f.blockRows()) * Math.ceilDiv(f.cols(), f.blockCols());
            case DeviceMatrix.Exl3 e -> e.decodeBytes();
            case DeviceMatrix.Expanded e -> e.parts().stream().mapToLong(ExpandKernels.Part::bytes).sum();
        };
    }

    /** Bytes of weights on the device. */
    public long bytes() {
        return bytes;
    }

    /** Seconds the upload (or generation) took. */
    public double seconds() {
        return seconds;
    }

    @Override
    public void close() {
        for (long p : allocations) {
            cuda.free(p);
        }
        allocations.clear();
    }

}

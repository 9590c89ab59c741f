package dev.spindle.backend.cuda;

import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadListener;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.model.Tensor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * A model's bf16 weights in device memory, as published (no conversion), with two fusions
 * of layout only: q|k|v stacked into one (Q + 2K, H) matrix and gate|up into one (2I, H),
 * so each is one GEMM. Uploaded by several threads, each through two pinned staging buffers
 * (see {@link Uploader}), or generated on the device for --load-format dummy.
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

    private final CudaDriver cuda;
    private final List<Long> allocations = new ArrayList<>();
    private final List<Layer> layers = new ArrayList<>();
    private long embedding, finalNorm;
    private DeviceMatrix lmHead;
    private long bytes;
    private double seconds;

    private CudaWeights(CudaDriver cuda) {
        this.cuda = cuda;
    }

    private long alloc(long bytes) {
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
        return build(cuda, out -> {
            int h = c.hiddenSize(), qd = tp.qDim(), kvd = tp.kvDim(), in = tp.intermediate();
            long rowBytes = 2L * h;
            Uploader up = new Uploader(cuda, listener);
            out.embedding = up.put(out.alloc(w.embedding().data().byteSize()), w.embedding());
            for (LayerWeights l : w.layers()) {
                long qkv = out.alloc(rowBytes * (qd + 2L * kvd));
                up.putRows(qkv, bf16(l.q()), tp.qStart(rank), qd);
                up.putRows(qkv + rowBytes * qd, bf16(l.k()), tp.kvStart(rank), kvd);
                up.putRows(qkv + rowBytes * (qd + kvd), bf16(l.v()), tp.kvStart(rank), kvd);
                long gateUp = out.alloc(2 * rowBytes * in);
                up.putRows(gateUp, bf16(l.gate()), tp.intermediateStart(rank), in);
                up.putRows(gateUp + rowBytes * in, bf16(l.up()), tp.intermediateStart(rank), in);
                long o = up.putColumns(out.alloc(2L * qd * h), bf16(l.o()), tp.qStart(rank), qd);
                long down = up.putColumns(out.alloc(2L * in * h), bf16(l.down()), tp.intermediateStart(rank), in);
                out.layers.add(new Layer(up.put(out.alloc(l.inputNorm().data().byteSize()), l.inputNorm()),
                        new DeviceMatrix.Bf16(qkv, qd + 2 * kvd, h), new DeviceMatrix.Bf16(o, h, qd),
                        up.put(out.alloc(l.postAttnNorm().data().byteSize()), l.postAttnNorm()),
                        new DeviceMatrix.Bf16(gateUp, 2 * in, h), new DeviceMatrix.Bf16(down, h, in)));
            }
            out.finalNorm = up.put(out.alloc(w.finalNorm().data().byteSize()), w.finalNorm());
            if (head) {
                Tensor lm = bf16(w.lmHead());
                long at = w.headIsEmbedding() ? out.embedding : up.put(out.alloc(lm.data().byteSize()), lm);
                out.lmHead = new DeviceMatrix.Bf16(at, c.vocabSize(), h);
            }
            up.run(UPLOAD_THREADS);
            cuda.sync();
        });
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
        return build(cuda, out -> {
            int h = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), in = c.intermediateSize();
            DummyFill f = new DummyFill(out, k, seed, c.parameterCount() * 2, listener);
            out.embedding = f.fill(c.vocabSize(), h, 0f, 1f);
            for (int l = 0; l < c.numLayers(); l++) {
                long norm1 = f.norm(h);
                long qkv = f.linear(q + 2L * kv, h);
                long o = f.linear(h, q);
                long norm2 = f.norm(h);
                long gateUp = f.linear(2L * in, h);
                long down = f.linear(h, in);
                out.layers.add(new Layer(norm1, new DeviceMatrix.Bf16(qkv, q + 2 * kv, h), new DeviceMatrix.Bf16(o, h, q), norm2,
                        new DeviceMatrix.Bf16(gateUp, 2 * in, h), new DeviceMatrix.Bf16(down, h, in)));
            }
            out.finalNorm = f.norm(h);
            if (head) {
                out.lmHead = new DeviceMatrix.Bf16(c.tiedEmbeddings() ? out.embedding : f.linear(c.vocabSize(), h), c.vocabSize(), h);
            }
            cuda.sync();
        });
    }

    private static final class DummyFill {
        private final CudaWeights out;
        private final CudaKernels k;
        private final LoadListener listener;
        private final long total;
        private long seed, done;

        DummyFill(CudaWeights out, CudaKernels k, long seed, long total, LoadListener listener) {
            this.out = out;
            this.k = k;
            this.seed = seed;
            this.total = total;
            this.listener = listener;
        }

        long fill(long rows, long cols, float center, float scale) {
            long n = rows * cols;
            long p = out.alloc(n * 2);
            k.fillDummy(p, n, (seed++) * 0x9E3779B97F4A7C15L, center, scale);
            done += n * 2;
            listener.loaded("dummy", done, total);
            return p;
        }

        long norm(long width) {
            return fill(1, width, 1f, 0.1f);
        }

        long linear(long outDim, long inDim) {
            return fill(outDim, inDim, 0f, (float) Math.sqrt(3.0 / inDim));
        }
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

    /** A host weight's bf16 data: the one format this backend uploads today. */
    private static Tensor bf16(Matrix m) {
        return switch (m) {
            case Bf16Matrix b -> b.data();
            case Fp8Matrix f -> throw new UnsupportedOperationException(f.name() + " is " + f.format() + ": the CUDA backend has no fp8 kernels"
                    + " yet (they are the next step of the fp8 work); fp8 weights run on the CPU backend (--backend cpu)");
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

    /**
     * Host to device in chunks, by several threads at once: {@link #put} lists a tensor's chunks (a fused
     * matrix's parts land at their offsets: the fusion is done by the copies), {@link #run} copies them.
     * Each thread takes the next chunk, copies it from the host mapping into one of its two pinned
     * buffers (reading the page cache, the slow part, in parallel; or the disk, for a checkpoint bound with
     * {@link dev.spindle.model.HostReads#AT_UPLOAD}: the reads and the copies to the device then overlap) and sends it on that buffer's stream,
     * so a thread fills one buffer while the other's copy runs and the copies of all threads share the
     * host link.
     */
    private static final class Uploader {
        private static final long PART = 32L << 20;

        /** rowBytes of each of the part's rows, stride apart in src (a column slice), or the whole src where rowBytes is 0. */
        private record Part(long dst, MemorySegment src, String tensor, boolean last, long rowBytes, long stride) {
            long bytes() {
                return rowBytes == 0 ? src.byteSize() : ((src.byteSize() - rowBytes) / stride + 1) * rowBytes;
            }
        }

        private final CudaDriver cuda;
        private final LoadListener listener;
        private final List<Part> parts = new ArrayList<>();
        /** Bytes of every part listed, summed when the copies start. */
        private long total;
        private final java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        private long done;

        Uploader(CudaDriver cuda, LoadListener listener) {
            this.cuda = cuda;
            this.listener = listener;
        }

        long put(long dst, Tensor t) {
            return put(dst, t.data(), t.name(), true);
        }

        private long put(long dst, MemorySegment src, String name, boolean endsTensor) {
            for (long off = 0; off < src.byteSize(); off += PART) {
                long n = Math.min(PART, src.byteSize() - off);
                parts.add(new Part(dst + off, src.asSlice(off, n), name, endsTensor && off + n == src.byteSize(), 0, 0));
            }
            return dst;
        }

        /** Rows [first, first + count) of a row-major 2-D weight (a column-parallel rank's rows): one contiguous range. */
        long putRows(long dst, Tensor t, int first, int count) {
            long width = t.data().byteSize() / t.dim(0);
            return put(dst, t.data().asSlice(first * width, count * width), t.name(), (long) (first + count) == t.dim(0));
        }

        /** Columns [first, first + count) of every row of a row-major 2-D weight (a row-parallel rank's columns), packed. */
        long putColumns(long dst, Tensor t, int first, int count) {
            long rows = t.dim(0), stride = t.data().byteSize() / rows, rowBytes = 2L * count;
            if (rowBytes == stride) {
                return put(dst, t);
            }
            long perPart = Math.max(1, PART / rowBytes);
            for (long r = 0; r < rows; r += perPart) {
                long n = Math.min(perPart, rows - r);
                // from the first row's slice to the end of the last row's
                MemorySegment src = t.data().asSlice(r * stride + 2L * first, (n - 1) * stride + rowBytes);
                parts.add(new Part(dst + r * rowBytes, src, t.name(), r + n == rows, rowBytes, stride));
            }
            return dst;
        }

        /** Copies every part listed, with up to {@code threads} threads; returns when all are on the device. */
        void run(int threads) {
            total = parts.stream().mapToLong(Part::bytes).sum();
            int n = Math.max(1, Math.min(threads, (parts.size() + 1) / 2));
            java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
            // weights held by a thread-confined arena are copied by this thread alone
            Thread probe = Thread.ofPlatform().unstarted(() -> { });
            if (!parts.stream().allMatch(p -> p.src().isAccessibleBy(probe))) {
                copyParts(failure);
                return;
            }
            List<Thread> workers = new ArrayList<>();
            for (int w = 0; w < n; w++) {
                workers.add(Thread.ofPlatform().name("spindle-upload-" + w).start(() -> {
                    try {
                        copyParts(failure);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            // every worker joined, even when interrupted (they stop at their next part once a failure is set): nothing may
            // read the checkpoint or copy into device memory after this returns
            boolean interrupted = false;
            for (Thread w : workers) {
                while (true) {
                    try {
                        w.join();
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true;
                        failure.compareAndSet(null, e);
                    }
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            Throwable e = failure.get();
            if (e instanceof RuntimeException r) {
                throw r;
            }
            if (e != null) {
                throw new CudaException("weight upload: " + e);
            }
        }

        private void copyParts(java.util.concurrent.atomic.AtomicReference<Throwable> failure) {
            cuda.makeCurrent();
            MemorySegment[] buf = new MemorySegment[2], stream = new MemorySegment[2];
            try {
                for (int b = 0; b < 2; b++) {
                    buf[b] = cuda.allocHost(PART);
                    stream[b] = cuda.createStream();
                }
                int b = 0;
                for (int i = next.getAndIncrement(); i < parts.size() && failure.get() == null; i = next.getAndIncrement()) {
                    Part p = parts.get(i);
                    if (p.src().isMapped()) {
                        // a checkpoint bound with HostReads.AT_UPLOAD: the part's pages read now, all at once (madvise, then
                        // a touch a page), by every thread at once, from the page cache or the disk
                        p.src().load();
                    }
                    cuda.sync(stream[b]); // this buffer's previous copy is done
                    if (p.rowBytes() == 0) {
                        MemorySegment.copy(p.src(), 0, buf[b], 0, p.src().byteSize());
                    } else {
                        for (long off = 0, at = 0; at < p.bytes(); off += p.stride(), at += p.rowBytes()) {
                            MemorySegment.copy(p.src(), off, buf[b], at, p.rowBytes());
                        }
                    }
                    cuda.copyToDeviceAsync(p.dst(), buf[b], p.bytes(), stream[b]);
                    progress(p);
                    b ^= 1;
                }
                for (MemorySegment s : stream) {
                    cuda.sync(s);
                }
            } finally {
                for (int b = 0; b < 2; b++) {
                    if (stream[b] != null) {
                        cuda.sync(stream[b]);
                        cuda.destroyStream(stream[b]);
                    }
                    if (buf[b] != null) {
                        cuda.freeHost(buf[b]);
                    }
                }
            }
        }

        private synchronized void progress(Part p) {
            done += p.bytes();
            if (p.last()) {
                listener.loaded(p.tensor(), done, total);
            }
        }

    }
}

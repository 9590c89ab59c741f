package dev.spindle.backend.cuda;

import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.model.Tensor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * A model's bf16 weights in device memory, as published (no conversion), with two fusions
 * of layout only: q|k|v stacked into one (Q + 2K, H) matrix and gate|up into one (2I, H),
 * so each is one GEMM. Uploaded through two pinned staging buffers (the copy of one chunk
 * overlaps the reading of the next), or generated on the device for --load-format dummy.
 */
public final class CudaWeights implements AutoCloseable {
    private static final long CHUNK = 64L << 20;

    /** Device addresses of one layer's weights. */
    public record Layer(long inputNorm, long qkv, long o, long postAttnNorm, long gateUp, long down) {
    }

    private final CudaDriver cuda;
    private final List<Long> allocations = new ArrayList<>();
    private final List<Layer> layers = new ArrayList<>();
    private long embedding, finalNorm, lmHead;
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
        CudaWeights out = new CudaWeights(cuda);
        long t0 = System.nanoTime();
        long total = 0;
        List<Tensor> all = new ArrayList<>();
        all.add(w.embedding());
        for (LayerWeights l : w.layers()) {
            all.addAll(List.of(l.inputNorm(), l.q(), l.k(), l.v(), l.o(), l.postAttnNorm(), l.gate(), l.up(), l.down()));
        }
        all.add(w.finalNorm());
        if (w.lmHead() != w.embedding()) {
            all.add(w.lmHead());
        }
        for (Tensor t : all) {
            total += t.data().byteSize();
        }
        Uploader up = new Uploader(cuda, listener, total);
        try {
            out.embedding = up.put(out.alloc(w.embedding().data().byteSize()), w.embedding());
            for (LayerWeights l : w.layers()) {
                long qkv = out.alloc(l.q().data().byteSize() + 2 * l.k().data().byteSize());
                up.put(qkv, l.q());
                up.put(qkv + l.q().data().byteSize(), l.k());
                up.put(qkv + l.q().data().byteSize() + l.k().data().byteSize(), l.v());
                long gateUp = out.alloc(2 * l.gate().data().byteSize());
                up.put(gateUp, l.gate());
                up.put(gateUp + l.gate().data().byteSize(), l.up());
                out.layers.add(new Layer(up.put(out.alloc(l.inputNorm().data().byteSize()), l.inputNorm()), qkv,
                        up.put(out.alloc(l.o().data().byteSize()), l.o()), up.put(out.alloc(l.postAttnNorm().data().byteSize()), l.postAttnNorm()),
                        gateUp, up.put(out.alloc(l.down().data().byteSize()), l.down())));
            }
            out.finalNorm = up.put(out.alloc(w.finalNorm().data().byteSize()), w.finalNorm());
            out.lmHead = w.lmHead() == w.embedding() ? out.embedding : up.put(out.alloc(w.lmHead().data().byteSize()), w.lmHead());
            cuda.sync();
        } catch (RuntimeException e) {
            out.close();
            throw e;
        } finally {
            up.close();
        }
        out.seconds = (System.nanoTime() - t0) / 1e9;
        return out;
    }

    /** Seeded random weights of the config's shapes, generated on the device (norms near 1, linear weights with variance 1/in). */
    public static CudaWeights dummy(CudaDriver cuda, CudaKernels k, ModelConfig c, long seed, LoadListener listener) {
        CudaWeights out = new CudaWeights(cuda);
        long t0 = System.nanoTime();
        int h = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), in = c.intermediateSize();
        DummyFill f = new DummyFill(out, k, seed, c.parameterCount() * 2, listener);
        try {
            out.embedding = f.fill(c.vocabSize(), h, 0f, 1f);
            for (int l = 0; l < c.numLayers(); l++) {
                long norm1 = f.norm(h);
                long qkv = f.linear(q + 2L * kv, h);
                long o = f.linear(h, q);
                long norm2 = f.norm(h);
                long gateUp = f.linear(2L * in, h);
                long down = f.linear(h, in);
                out.layers.add(new Layer(norm1, qkv, o, norm2, gateUp, down));
            }
            out.finalNorm = f.norm(h);
            out.lmHead = c.tiedEmbeddings() ? out.embedding : f.linear(c.vocabSize(), h);
            cuda.sync();
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        out.seconds = (System.nanoTime() - t0) / 1e9;
        return out;
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

    public long lmHead() {
        return lmHead;
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

    /** Host to device through two pinned buffers: fill one while the other's copy runs. */
    private static final class Uploader implements AutoCloseable {
        private final CudaDriver cuda;
        private final LoadListener listener;
        private final long total;
        private final MemorySegment[] staging;
        private long done;
        private int next;

        Uploader(CudaDriver cuda, LoadListener listener, long total) {
            this.cuda = cuda;
            this.listener = listener;
            this.total = total;
            this.staging = new MemorySegment[]{cuda.allocHost(CHUNK), cuda.allocHost(CHUNK)};
        }

        long put(long dst, Tensor t) {
            MemorySegment src = t.data();
            for (long off = 0; off < src.byteSize(); off += CHUNK) {
                long n = Math.min(CHUNK, src.byteSize() - off);
                MemorySegment buf = staging[next];
                next ^= 1;
                MemorySegment.copy(src, off, buf, 0, n);
                cuda.sync(); // the previous chunk's copy is done: both buffers are free again
                cuda.copyToDeviceAsync(dst + off, buf, n);
                done += n;
            }
            listener.loaded(t.name(), done, total);
            return dst;
        }

        @Override
        public void close() {
            cuda.sync();
            for (MemorySegment s : staging) {
                cuda.freeHost(s);
            }
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.model.LoadListener;
import dev.spindle.model.Tensor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Host to device in chunks, by several threads at once: {@link #put} lists a tensor's chunks (a fused
 * matrix's parts land at their offsets: the fusion is done by the copies), {@link #run} copies them.
 * Each thread takes the next chunk, copies it from the host mapping into one of its two pinned
 * buffers (reading the page cache, the slow part, in parallel; or the disk, for a checkpoint bound with
 * {@link dev.spindle.model.HostReads#AT_UPLOAD}: the reads and the copies to the device then overlap) and sends it on that buffer's stream,
 * so a thread fills one buffer while the other's copy runs and the copies of all threads share the
 * host link.
 */
final class WeightUploader {
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

    WeightUploader(CudaDriver cuda, LoadListener listener) {
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

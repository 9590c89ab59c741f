package dev.spindle.model;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The operating system's page cache over a checkpoint's files (Linux): how much of a file is in memory,
 * dropping it, and the disk's own read speed (direct reads, around the cache). {@code bench --cold-page-cache}
 * uses them to time a start from the disk against the disk's speed measured in the same run.
 */
public final class PageCache {
    private static final int O_RDONLY = 0;
    private static final int POSIX_FADV_DONTNEED = 4;
    /** A direct read's share of the checkpoint that one thread takes at a time: 64 MiB. */
    static final long READ_CHUNK = 64L << 20;
    /** One thread's direct-read buffer: 16 MiB. */
    static final int READ_BUFFER = 16 << 20;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Optional<Functions> FUNCTIONS = Functions.find();

    private PageCache() {
    }

    /** libc's open, fdatasync, posix_fadvise, close, mincore and getpagesize, where the C library has them all (Linux). */
    private record Functions(MethodHandle open, MethodHandle fdatasync, MethodHandle fadvise, MethodHandle close, MethodHandle mincore,
                             long pageSize) {
        static Optional<Functions> find() {
            var lookup = LINKER.defaultLookup();
            List<String> names = List.of("open", "fdatasync", "posix_fadvise", "close", "mincore", "getpagesize");
            if (!names.stream().allMatch(n -> lookup.find(n).isPresent())) {
                return Optional.empty();
            }
            var errno = Linker.Option.captureCallState("errno");
            try {
                long page = (int) LINKER.downcallHandle(lookup.find("getpagesize").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT))
                        .invokeExact();
                return Optional.of(new Functions(
                        LINKER.downcallHandle(lookup.find("open").orElseThrow(),
                                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT), errno,
                                Linker.Option.firstVariadicArg(2)),
                        LINKER.downcallHandle(lookup.find("fdatasync").orElseThrow(),
                                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno),
                        // returns the error number itself (it does not set errno)
                        LINKER.downcallHandle(lookup.find("posix_fadvise").orElseThrow(),
                                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                        ValueLayout.JAVA_INT)),
                        LINKER.downcallHandle(lookup.find("close").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT)),
                        LINKER.downcallHandle(lookup.find("mincore").orElseThrow(),
                                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS), errno),
                        page));
            } catch (Throwable t) {
                return Optional.empty();
            }
        }
    }

    /** Whether this system lets Spindle see and drop a file's cached pages (Linux's C library), and why not. */
    public static Optional<String> unsupportedReason() {
        return FUNCTIONS.isPresent() ? Optional.empty()
                : Optional.of("the C library has no posix_fadvise / mincore (the page cache can be dropped and inspected on Linux only)");
    }

    private static Functions functions() {
        return FUNCTIONS.orElseThrow(() -> new UnsupportedOperationException(unsupportedReason().orElseThrow()));
    }

    /** The bytes of {@code file} in the page cache now (whole pages, the last one counted to the file's end). */
    public static long residentBytes(Path file) {
        Functions f = functions();
        try (Arena arena = Arena.ofConfined(); FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size == 0) {
                return 0;
            }
            MemorySegment map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            long pages = (size + f.pageSize() - 1) / f.pageSize();
            MemorySegment vec = arena.allocate(pages);
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) f.mincore().invokeExact(state, map, size, vec);
            if (rc != 0) {
                throw new ModelLoadException(file + ": mincore failed (errno " + (int) ERRNO.get(state, 0L) + ")");
            }
            long resident = 0;
            for (long p = 0; p < pages; p++) {
                if ((vec.get(ValueLayout.JAVA_BYTE, p) & 1) != 0) {
                    resident += Math.min(f.pageSize(), size - p * f.pageSize());
                }
            }
            return resident;
        } catch (IOException e) {
            throw new ModelLoadException(file + ": cannot be read: " + e.getMessage(), e);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Drops {@code file}'s pages from the page cache (written back first, so that dirty pages can go too). Pages that
     * a process has mapped and touched stay: drop a checkpoint before mapping it. A file system that keeps its files in
     * memory (tmpfs, such as /dev/shm) keeps them: {@link #residentBytes} tells.
     */
    public static void evict(Path file) {
        Functions f = functions();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) f.open().invokeExact(state, arena.allocateFrom(file.toString()), O_RDONLY);
            if (fd < 0) {
                throw new ModelLoadException(file + ": cannot be opened to drop its cached pages (errno " + (int) ERRNO.get(state, 0L) + ")");
            }
            try {
                int sync = (int) f.fdatasync().invokeExact(state, fd);
                if (sync != 0) {
                    throw new ModelLoadException(file + ": fdatasync failed (errno " + (int) ERRNO.get(state, 0L) + ")");
                }
                int advice = (int) f.fadvise().invokeExact(fd, 0L, 0L, POSIX_FADV_DONTNEED);
                if (advice != 0) {
                    throw new ModelLoadException(file + ": posix_fadvise(DONTNEED) failed (error " + advice + ")");
                }
            } finally {
                int ignored = (int) f.close().invokeExact(fd);
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** A direct read of files: the bytes read and the seconds it took. */
    public record DiskRead(long bytes, double seconds) {
        public double gbPerSecond() {
            return bytes / seconds / 1e9;
        }
    }

    /**
     * The disk's read speed over {@code files}: every byte read once by {@code threads} threads, 64 MiB at a time in
     * 16 MiB reads, with direct I/O (no page cache, so the figure is the device's and the cache is left as it was).
     *
     * @throws ModelLoadException where the file system refuses direct reads (tmpfs does), naming the file
     */
    public static DiskRead directRead(List<Path> files, int threads) {
        return directRead(files, threads, READ_CHUNK, READ_BUFFER);
    }

    /** {@link #directRead(List, int)} in chunks of {@code chunk} bytes read {@code buffer} bytes at a time (multiples of the disk's block). */
    static DiskRead directRead(List<Path> files, int threads, long chunk, int buffer) {
        record Chunk(Path file, long offset, long length) {
        }
        List<Chunk> chunks = new ArrayList<>();
        for (Path file : files) {
            long size = size(file);
            for (long off = 0; off < size; off += chunk) {
                chunks.add(new Chunk(file, off, Math.min(chunk, size - off)));
            }
        }
        AtomicInteger next = new AtomicInteger();
        AtomicLong read = new AtomicLong();
        long t0 = System.nanoTime();
        LoadThreads.run(threads, "spindle-disk-read", "measuring the disk's read speed", failed -> {
            ByteBuffer bytes = null;
            for (int i = next.getAndIncrement(); i < chunks.size() && !failed.getAsBoolean(); i = next.getAndIncrement()) {
                Chunk c = chunks.get(i);
                try (FileChannel ch = FileChannel.open(c.file(), StandardOpenOption.READ, com.sun.nio.file.ExtendedOpenOption.DIRECT)) {
                    int align = (int) Files.getFileStore(c.file()).getBlockSize();
                    if (bytes == null) {
                        bytes = ByteBuffer.allocateDirect(buffer + align).alignedSlice(align);
                    }
                    for (long done = 0; done < c.length(); ) {
                        // whole blocks, at most the chunk's rest (a short read at the file's end)
                        long rest = (c.length() - done + align - 1) / align * align;
                        bytes.clear().limit((int) Math.min(bytes.capacity() / align * align, rest));
                        int n = ch.read(bytes, c.offset() + done);
                        if (n <= 0) {
                            throw new ModelLoadException(c.file() + ": ended at byte " + (c.offset() + done) + " while read directly");
                        }
                        done += n;
                        read.addAndGet(n);
                    }
                } catch (IOException | UnsupportedOperationException e) {
                    throw new ModelLoadException(c.file() + ": cannot be read with direct I/O (a file system such as tmpfs keeps files "
                            + "in memory and has no disk to measure): " + e, e);
                }
            }
        });
        return new DiskRead(read.get(), (System.nanoTime() - t0) / 1e9);
    }

    private static long size(Path file) {
        try {
            return Files.size(file);
        } catch (IOException e) {
            throw new ModelLoadException(file + ": cannot be read: " + e.getMessage(), e);
        }
    }
}

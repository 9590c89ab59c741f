package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The CUDA driver API through FFM: the calls Spindle makes, each status checked and
 * turned into a {@link CudaException} naming the call. One object per device ({@link #device}),
 * opened once; {@link #get()} (device 0) is empty where there is no driver (no GPU), so callers can
 * skip cleanly.
 * <p>
 * All work goes to one stream ({@link #stream()}), in order; kernels launch
 * asynchronously and {@link #sync()} waits. Launches reuse one parameter buffer, so they
 * come from one thread at a time (the engine thread).
 */
public final class CudaDriver {
    /** The driver library, opened once per process; empty where there is none. */
    private static final Optional<NativeLibrary> LIBRARY = NativeLibrary.open(List.of("libcuda.so.1", "libcuda.so", "nvcuda.dll"));
    /** One object per device ordinal and lane (the device's primary context, the lane's stream), made on first use. */
    private static final Map<Lane, Optional<CudaDriver>> DEVICES = new ConcurrentHashMap<>();

    private record Lane(int ordinal, int lane) { }
    /** The context current on each thread, as far as Spindle set it (cuCtxSetCurrent is per thread). */
    private static final ThreadLocal<MemorySegment> CURRENT = new ThreadLocal<>();

    private final NativeLibrary lib;
    private final Map<String, MethodHandle> handles = new ConcurrentHashMap<>();
    private final MethodHandle cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuStreamSynchronize, cuGetErrorName,
            cuGraphLaunch, cuEventRecord, cuStreamWaitEvent, cuEventSynchronize;
    private final String deviceName;
    private final int device, lane, computeMajor, computeMinor, sharedOptIn;
    private final MemorySegment stream;
    private final MemorySegment context;
    private final KernelLauncher launcher;

    private CudaDriver(NativeLibrary lib, int ordinal, int lane) {
        this.lib = lib;
        this.lane = lane;
        cuEventRecord = lib.function("cuEventRecord", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        cuStreamWaitEvent = lib.function("cuStreamWaitEvent", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        cuEventSynchronize = lib.function("cuEventSynchronize", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        cuMemcpyHtoDAsync = lib.function("cuMemcpyHtoDAsync_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
        cuMemcpyDtoHAsync = lib.function("cuMemcpyDtoHAsync_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
        cuStreamSynchronize = lib.function("cuStreamSynchronize", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        cuGetErrorName = lib.function("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        cuGraphLaunch = lib.function("cuGraphLaunch", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        try (Arena a = Arena.ofConfined()) {
            call("cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT), 0);
            int count = count();
            if (count <= ordinal) {
                throw new CudaException(count == 0 ? "no CUDA device" : "no CUDA device " + ordinal + " (this machine has " + count + ")");
            }
            MemorySegment dev = a.allocate(JAVA_INT);
            call("cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), dev, ordinal);
            device = dev.get(JAVA_INT, 0);
            MemorySegment name = a.allocate(256);
            call("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), name, 256, device);
            deviceName = name.getString(0);
            computeMajor = attribute(75 /* COMPUTE_CAPABILITY_MAJOR */);
            computeMinor = attribute(76 /* COMPUTE_CAPABILITY_MINOR */);
            sharedOptIn = attribute(97 /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */);
            context = returned("cuDevicePrimaryCtxRetain", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), device);
            makeCurrent();
            stream = createStream();
        }
        launcher = new KernelLauncher(this, lib, stream, computeMajor >= 9);
    }

    private int attribute(int attribute) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment value = a.allocate(JAVA_INT);
            call("cuDeviceGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), value, attribute, device);
            return value.get(JAVA_INT, 0);
        }
    }

    private static Optional<CudaDriver> load(Lane at) {
        int ordinal = at.ordinal();
        if (LIBRARY.isEmpty()) {
            return Optional.empty();
        }
        try {
            return Optional.of(new CudaDriver(LIBRARY.get(), ordinal, at.lane()));
        } catch (CudaException | UnsatisfiedLinkError e) {
            System.err.println("spindle: CUDA device " + ordinal + " unusable: " + e.getMessage());
            return Optional.empty();
        }
    }

    /** Device 0, or empty where there is no driver or GPU. */
    public static Optional<CudaDriver> get() {
        return device(0);
    }

    /**
     * The device with this ordinal (its own primary context, stream and launch buffers), or empty where
     * there is no such device. Each device is one object for the process; two may be used side by side,
     * each from its own thread (tensor parallelism), or one after the other from one thread.
     */
    public static Optional<CudaDriver> device(int ordinal) {
        return device(ordinal, 0);
    }

    /**
     * Lane {@code lane} of device {@code ordinal}: lane 0 is {@link #device(int)}; another lane is a second object on the
     * same device (its primary context, so memory and kernels are shared) with its own stream and launch buffers, for two
     * tensor-parallel ranks placed on one GPU (how the multi-rank path runs on a single GPU).
     */
    public static Optional<CudaDriver> device(int ordinal, int lane) {
        if (lane < 0) {
            throw new IllegalArgumentException("lane " + lane);
        }
        return DEVICES.computeIfAbsent(new Lane(ordinal, lane), CudaDriver::load);
    }

    /** How many CUDA devices this machine has (0 without a driver). */
    public static int deviceCount() {
        return get().map(CudaDriver::count).orElse(0);
    }

    private int count() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment count = a.allocate(JAVA_INT);
            call("cuDeviceGetCount", FunctionDescriptor.of(JAVA_INT, ADDRESS), count);
            return count.get(JAVA_INT, 0);
        }
    }

    /** The device's ordinal. */
    public int ordinal() {
        return device;
    }

    /** This object's lane on its device (0: the device's first). */
    public int lane() {
        return lane;
    }

    /** Whether {@code other} is on the same GPU (another lane of it, or this one). */
    public boolean sameDevice(CudaDriver other) {
        return other.device == device;
    }

    /**
     * Lets kernels on this device read {@code peer}'s memory (CUDA peer access, over NVLink or PCIe); nothing to do on
     * the same device.
     *
     * @throws CudaException naming both GPUs when they cannot reach each other's memory
     */
    public void enablePeerAccess(CudaDriver peer) {
        if (sameDevice(peer)) {
            return;
        }
        makeCurrent();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment can = a.allocate(JAVA_INT);
            call("cuDeviceCanAccessPeer", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), can, device, peer.device);
            if (can.get(JAVA_INT, 0) == 0) {
                throw new CudaException("GPU " + device + " cannot read GPU " + peer.device + "'s memory (no peer access between them),"
                        + " which tensor parallelism's all-reduce needs");
            }
            MethodHandle h = handles.computeIfAbsent("cuCtxEnablePeerAccess", n -> lib.function(n, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT)));
            int status = (int) h.invokeExact(peer.context, 0);
            if (status != 0 && status != 704 /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */) {
                check("cuCtxEnablePeerAccess", status);
            }
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuCtxEnablePeerAccess: " + t);
        }
    }

    /** An event (no timing) for ordering one stream's work after another's: {@link #record}, {@link #waitFor}. */
    public MemorySegment createEvent() {
        return event(2 /* CU_EVENT_DISABLE_TIMING */);
    }

    /** An event that records a time on the GPU ({@link #elapsedSeconds}), for measuring a stream's work between two records. */
    public MemorySegment createTimingEvent() {
        return event(0);
    }

    private MemorySegment event(int flags) {
        makeCurrent();
        return returned("cuEventCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), flags);
    }

    /** Seconds between two completed records of timing events ({@link #createTimingEvent}). */
    public double elapsedSeconds(MemorySegment from, MemorySegment to) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ms = a.allocate(JAVA_FLOAT);
            call("cuEventElapsedTime", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), ms, from, to);
            return ms.get(JAVA_FLOAT, 0) / 1e3;
        }
    }

    /** cuProfilerStart: a profiler started with profiling off (ncu --profile-from-start off) collects from here. */
    public void profilerStart() {
        makeCurrent();
        call("cuProfilerStart", FunctionDescriptor.of(JAVA_INT));
    }

    /** cuProfilerStop: the end of what {@link #profilerStart} began (the stream's work so far finished first). */
    public void profilerStop() {
        sync();
        call("cuProfilerStop", FunctionDescriptor.of(JAVA_INT));
    }

    public void destroyEvent(MemorySegment e) {
        call("cuEventDestroy_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS), e);
    }

    /** Records {@code e} after the stream's work so far (inside a capture: a node other streams' waits join). */
    public void record(MemorySegment e) {
        checked("cuEventRecord", () -> (int) cuEventRecord.invokeExact(e, stream));
    }

    /** Waits on the host until the work before {@code e}'s last record is done (at once if it never was recorded). */
    public void syncEvent(MemorySegment e) {
        checked("cuEventSynchronize", () -> (int) cuEventSynchronize.invokeExact(e));
    }

    /** The stream's later work waits for the work before {@code e}'s last record (any stream, any device of the process). */
    public void waitFor(MemorySegment e) {
        checked("cuStreamWaitEvent", () -> (int) cuStreamWaitEvent.invokeExact(stream, e, 0));
    }

    /**
     * Makes this device's context current on the calling thread (contexts are current per thread):
     * every entry point that issues work on a thread other than the one that opened the device calls
     * it first; a cheap check when it is current already.
     */
    public void makeCurrent() {
        if (CURRENT.get() != context) {
            call("cuCtxSetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS), context);
            CURRENT.set(context);
        }
    }

    public String deviceName() {
        return deviceName;
    }

    /** The device's compute capability: {major, minor} (9, 0 for an H100 or H200). */
    public int[] computeCapability() {
        return new int[]{computeMajor, computeMinor};
    }

    /** The most dynamic shared memory one block may be given (opt-in), in bytes. */
    public int maxSharedMemory() {
        return sharedOptIn;
    }

    /** The stream all of Spindle's GPU work goes to. */
    public MemorySegment stream() {
        return stream;
    }

    private String errorName(int status) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            if ((int) cuGetErrorName.invokeExact(status, p) == 0) {
                return p.get(ADDRESS, 0).reinterpret(128).getString(0);
            }
        } catch (Throwable ignored) {
            // keep the number
        }
        return "CUDA error " + status;
    }

    /** A driver call of the hot paths (its invokeExact), returning the driver's status. */
    @FunctionalInterface
    private interface Status {
        int get() throws Throwable;
    }

    /** Makes a hot-path driver call and checks its status; anything the downcall throws is reported under the call's name. */
    private void checked(String call, Status downcall) {
        int status;
        try {
            status = downcall.get();
        } catch (Throwable t) {
            throw new CudaException(call + ": " + t);
        }
        check(call, status);
    }

    void check(String call, int status) {
        if (status != 0) {
            throw new CudaException(call + " failed: " + errorName(status));
        }
    }

    /** A driver call made rarely (setup, allocation): looked up by name, checked. */
    int call(String name, FunctionDescriptor fd, Object... args) {
        try {
            MethodHandle h = handles.computeIfAbsent(name, n -> lib.function(n, fd));
            int status = (int) h.invokeWithArguments(args);
            check(name, status);
            return status;
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException(name + ": " + t);
        }
    }

    /** A driver call whose first parameter is where it writes a handle, given the other arguments: the handle. */
    private MemorySegment returned(String name, FunctionDescriptor fd, Object... rest) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Object[] args = new Object[rest.length + 1];
            args[0] = out;
            System.arraycopy(rest, 0, args, 1, rest.length);
            call(name, fd, args);
            return out.get(ADDRESS, 0);
        }
    }

    /** Loads a fatbin/cubin/PTX image; returns the module handle. */
    public MemorySegment loadModule(byte[] image) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment img = a.allocate(image.length + 1L);
            img.copyFrom(MemorySegment.ofArray(image));
            return returned("cuModuleLoadData", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), img);
        }
    }

    public MemorySegment function(MemorySegment module, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            try {
                call("cuModuleGetFunction", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), out, module, a.allocateFrom(name));
            } catch (CudaException e) {
                throw new CudaException("kernel " + name + ": " + e.getMessage());
            }
            return out.get(ADDRESS, 0);
        }
    }

    /** Lets {@code f} use up to {@code bytes} of dynamic shared memory (beyond the default 48 KiB). */
    public void allowSharedMemory(MemorySegment f, int bytes) {
        call("cuFuncSetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), f, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, bytes);
    }

    /** Device memory of {@code bytes}; returns its address. */
    public long alloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            try {
                call("cuMemAlloc_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), out, Math.max(bytes, 256));
            } catch (CudaException e) {
                throw new CudaException("cuMemAlloc(" + bytes + " bytes) failed: " + e.getMessage());
            }
            return out.get(JAVA_LONG, 0);
        }
    }

    public void free(long ptr) {
        call("cuMemFree_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG), ptr);
    }

    /** Pinned (page-locked) host memory for fast transfers. */
    public MemorySegment allocHost(long bytes) {
        return returned("cuMemHostAlloc", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), bytes, 0).reinterpret(bytes);
    }

    public void freeHost(MemorySegment p) {
        call("cuMemFreeHost", FunctionDescriptor.of(JAVA_INT, ADDRESS), p);
    }

    /** {free, total} device memory in bytes. */
    public long[] memInfo() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment free = a.allocate(JAVA_LONG), total = a.allocate(JAVA_LONG);
            call("cuMemGetInfo_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), free, total);
            return new long[]{free.get(JAVA_LONG, 0), total.get(JAVA_LONG, 0)};
        }
    }

    public void memsetZero(long dst, long bytes) {
        memset(dst, (byte) 0, bytes);
    }

    /** Sets {@code bytes} bytes at dst to {@code value} (0xFF: every bf16 a NaN, for tests of what a kernel must not read). */
    public void memset(long dst, byte value, long bytes) {
        call("cuMemsetD8Async", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ValueLayout.JAVA_BYTE, JAVA_LONG, ADDRESS), dst, value, bytes, stream);
    }

    public void copyDeviceToDevice(long dst, long src, long bytes) {
        call("cuMemcpyDtoDAsync_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS), dst, src, bytes, stream);
    }

    /** Copies host to device in stream order (asynchronous when src is pinned). */
    public void copyToDeviceAsync(long dst, MemorySegment src, long bytes) {
        copyToDeviceAsync(dst, src, bytes, stream);
    }

    /**
     * A stream of its own (non-blocking), for work beside the main stream, such as the weight upload's
     * copies from several threads; destroyed by {@link #destroyStream}.
     */
    public MemorySegment createStream() {
        makeCurrent();
        return returned("cuStreamCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), 1 /* CU_STREAM_NON_BLOCKING */);
    }

    public void destroyStream(MemorySegment s) {
        makeCurrent();
        call("cuStreamDestroy_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS), s);
    }

    /** Waits for the work of {@code s}. */
    public void sync(MemorySegment s) {
        checked("cuStreamSynchronize", () -> (int) cuStreamSynchronize.invokeExact(s));
    }

    /** Copies host to device in the order of stream {@code s} (asynchronous when src is pinned). */
    public void copyToDeviceAsync(long dst, MemorySegment src, long bytes, MemorySegment s) {
        checked("cuMemcpyHtoDAsync", () -> (int) cuMemcpyHtoDAsync.invokeExact(dst, src, bytes, s));
    }

    /** Copies and waits. */
    public void copyToDevice(long dst, MemorySegment src) {
        copyToDeviceAsync(dst, src, src.byteSize());
        sync();
    }

    /** Copies device to host after the stream's earlier work, without waiting ({@code dst} pinned; record an event to wait on). */
    public void copyToHostAsync(MemorySegment dst, long src) {
        checked("cuMemcpyDtoHAsync", () -> (int) cuMemcpyDtoHAsync.invokeExact(dst, src, dst.byteSize(), stream));
    }

    /** Copies device to host after the stream's earlier work, and waits. */
    public void copyToHost(MemorySegment dst, long src) {
        copyToHostAsync(dst, src);
        sync();
    }

    public void sync() {
        checked("cuStreamSynchronize", () -> (int) cuStreamSynchronize.invokeExact(stream));
    }

    /** Launches {@code f} on the stream, asynchronously; args in order: Long (device pointer or long), Integer, Float, Double. */
    public void launch(MemorySegment f, int gx, int gy, int bx, Object... args) {
        launchShared(f, gx, gy, bx, 0, args);
    }

    /** As {@link #launch}, with {@code sharedBytes} of dynamic shared memory. */
    public void launchShared(MemorySegment f, int gx, int gy, int bx, int sharedBytes, Object... args) {
        launcher.launch(f, gx, gy, bx, sharedBytes, args);
    }

    /** Programmatic dependent launch on (sm_90 or later) or off for the launches that follow ({@link KernelLauncher}); whether it was on. */
    public boolean dependentLaunches(boolean on) {
        return launcher.dependentLaunches(on);
    }

    /** Launches an instantiated graph ({@link GraphCapture#capture}) on the stream. */
    public void launchGraph(MemorySegment exec) {
        checked("cuGraphLaunch", () -> (int) cuGraphLaunch.invokeExact(exec, stream));
    }

    /** Seconds the stream spends on {@code work} (timed with events on the stream). */
    public double time(Runnable work) {
        MemorySegment e0 = createTimingEvent(), e1 = createTimingEvent();
        try {
            record(e0);
            work.run();
            record(e1);
            syncEvent(e1);
            return elapsedSeconds(e0, e1);
        } finally {
            destroyEvent(e0);
            destroyEvent(e1);
        }
    }
}

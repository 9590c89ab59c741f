package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * NCCL ({@code libnccl.so.2}: the NCCL package, or the {@code nvidia-nccl-cu13} wheel's {@code nvidia/nccl/lib} on
 * the loader path) through FFM, for tensor parallelism inside one process: {@link #initAll} makes one
 * communicator per GPU of the replica (ncclCommInitAll: no second process, no MPI), and {@link #allReduceSum}
 * sums a device buffer over them on each GPU's stream. Every status is checked and named with NCCL's own
 * text and the communicator's last error.
 *
 * <p>Before NCCL first initialises, the process's environment gets {@code NCCL_NVLS_ENABLE=0}: NVLink
 * multicast (NVLS) stays off (on shared GPU machines a program using it can take the host's GPUs out of
 * service), and Spindle never calls {@code cuMulticastCreate}. These variables are NCCL's, set by Spindle for
 * itself; they are not a configuration of Spindle's.
 *
 * <p>Determinism: an element's sum over 2 ranks is {@code a + b} whatever NCCL's algorithm, so the tensor-parallel
 * invariants hold at 2 ranks with NCCL's fp32 all-reduce; over more ranks the order of NCCL's sum depends on the
 * message size (ring chunking), so 4 ranks need an all-reduce of fixed rank order instead (not written yet).
 */
public final class Nccl {
    /** ncclDataType_t values. */
    public static final int FLOAT32 = 7, BFLOAT16 = 9;
    private static final int SUM = 0;
    private static final List<String> RESULTS = List.of("ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
            "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress");
    private static final Optional<NativeLibrary> LIBRARY;

    static {
        setenv("NCCL_NVLS_ENABLE", "0");
        LIBRARY = NativeLibrary.open(List.of("libnccl.so.2", "libnccl.so"));
    }

    private final MethodHandle getVersion, commInitAll, allReduce, groupStart, groupEnd, commDestroy, getErrorString, getLastError;

    private Nccl(NativeLibrary lib) {
        getVersion = lib.function("ncclGetVersion", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        commInitAll = lib.function("ncclCommInitAll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
        allReduce = lib.function("ncclAllReduce", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
        groupStart = lib.function("ncclGroupStart", FunctionDescriptor.of(JAVA_INT));
        groupEnd = lib.function("ncclGroupEnd", FunctionDescriptor.of(JAVA_INT));
        commDestroy = lib.function("ncclCommDestroy", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        getErrorString = lib.function("ncclGetErrorString", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        getLastError = lib.function("ncclGetLastError", FunctionDescriptor.of(ADDRESS, ADDRESS));
    }

    /** NCCL, if the loader finds it. */
    public static Optional<Nccl> load() {
        return LIBRARY.map(Nccl::new);
    }

    /** Why {@link #load} is empty, or null. */
    public static String unavailableReason() {
        return LIBRARY.isPresent() ? null : "libnccl.so.2 is not on the loader path (the NCCL package, or the nvidia-nccl-cu13 wheel's "
                + "nvidia/nccl/lib on LD_LIBRARY_PATH)";
    }

    /** NCCL's version code (major * 10000 + minor * 100 + patch for 2.9 and later). */
    public int version() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check("ncclGetVersion", invoke(getVersion, v), MemorySegment.NULL);
            return v.get(JAVA_INT, 0);
        }
    }

    /** One communicator per device of {@code devices} (ordinals), rank i on devices[i]. */
    public MemorySegment[] initAll(int[] devices) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment comms = a.allocate(ADDRESS, devices.length);
            check("ncclCommInitAll(" + devices.length + " devices)", invoke(commInitAll, comms, devices.length, a.allocateFrom(JAVA_INT, devices)),
                    MemorySegment.NULL);
            MemorySegment[] out = new MemorySegment[devices.length];
            for (int i = 0; i < devices.length; i++) {
                out[i] = comms.getAtIndex(ADDRESS, i);
            }
            return out;
        }
    }

    /**
     * recv = the sum over the communicator's ranks of send ({@code count} elements of {@code dataType}), in the
     * order of {@code stream} (a CUstream of the rank's device). With several ranks driven from one thread, the
     * calls go between {@link #groupStart} and {@link #groupEnd}.
     */
    public void allReduceSum(long send, long recv, long count, int dataType, MemorySegment comm, MemorySegment stream) {
        check("ncclAllReduce(" + count + " elements)", invoke(allReduce, send, recv, count, dataType, SUM, comm, stream), comm);
    }

    public void groupStart() {
        check("ncclGroupStart", invoke(groupStart), MemorySegment.NULL);
    }

    public void groupEnd() {
        check("ncclGroupEnd", invoke(groupEnd), MemorySegment.NULL);
    }

    public void destroy(MemorySegment comm) {
        check("ncclCommDestroy", invoke(commDestroy, comm), MemorySegment.NULL);
    }

    private static int invoke(MethodHandle h, Object... args) {
        try {
            return (int) h.invokeWithArguments(args);
        } catch (Throwable t) {
            throw new CudaException("NCCL call failed to run: " + t);
        }
    }

    private void check(String call, int status, MemorySegment comm) {
        if (status == 0) {
            return;
        }
        String name = status < RESULTS.size() ? RESULTS.get(status) : "ncclResult " + status;
        String text = "", last = "";
        try {
            text = ((MemorySegment) getErrorString.invokeExact(status)).reinterpret(512).getString(0);
            last = ((MemorySegment) getLastError.invokeExact(comm)).reinterpret(2048).getString(0);
        } catch (Throwable ignored) {
            // keep the name
        }
        throw new CudaException(call + " failed: " + name + " (" + text + ")" + (last.isEmpty() ? "" : ": " + last));
    }

    /** Sets a variable of this process's environment (libc setenv), before a library reads it. */
    static void setenv(String name, String value) {
        Linker linker = Linker.nativeLinker();
        MethodHandle h = linker.defaultLookup().find("setenv")
                .map(s -> linker.downcallHandle(s, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT)))
                .orElseThrow(() -> new UnsatisfiedLinkError("libc has no setenv"));
        try (Arena a = Arena.ofConfined()) {
            int rc = (int) h.invokeExact(a.allocateFrom(name), a.allocateFrom(value), 1);
            if (rc != 0) {
                throw new CudaException("setenv(" + name + ") failed");
            }
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("setenv(" + name + "): " + t);
        }
    }
}

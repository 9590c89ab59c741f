package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The CUDA driver API through FFM: the calls Spindle makes, each status checked and
 * turned into a {@link CudaException} naming the call. Opened once; {@link #get()} is
 * empty where there is no driver (no GPU), so callers can skip cleanly.
 */
public final class CudaDriver {
    private static final Optional<CudaDriver> INSTANCE = load();

    private final MethodHandle cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDevicePrimaryCtxRetain, cuCtxSetCurrent,
            cuModuleLoadData, cuModuleGetFunction, cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH, cuLaunchKernel,
            cuCtxSynchronize, cuGetErrorName;
    private final String deviceName;

    private CudaDriver(NativeLibrary lib) {
        cuInit = lib.function("cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        cuDeviceGetCount = lib.function("cuDeviceGetCount", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        cuDeviceGet = lib.function("cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        cuDeviceGetName = lib.function("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        cuDevicePrimaryCtxRetain = lib.function("cuDevicePrimaryCtxRetain", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        cuCtxSetCurrent = lib.function("cuCtxSetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        cuModuleLoadData = lib.function("cuModuleLoadData", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        cuModuleGetFunction = lib.function("cuModuleGetFunction", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        cuMemAlloc = lib.function("cuMemAlloc_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        cuMemFree = lib.function("cuMemFree_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        cuMemcpyHtoD = lib.function("cuMemcpyHtoD_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG));
        cuMemcpyDtoH = lib.function("cuMemcpyDtoH_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
        cuLaunchKernel = lib.function("cuLaunchKernel", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT,
                JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        cuCtxSynchronize = lib.function("cuCtxSynchronize", FunctionDescriptor.of(JAVA_INT));
        cuGetErrorName = lib.function("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        try (Arena a = Arena.ofConfined()) {
            check("cuInit", (int) cuInit.invokeExact(0));
            MemorySegment count = a.allocate(JAVA_INT);
            check("cuDeviceGetCount", (int) cuDeviceGetCount.invokeExact(count));
            if (count.get(JAVA_INT, 0) == 0) {
                throw new CudaException("no CUDA device");
            }
            MemorySegment dev = a.allocate(JAVA_INT);
            check("cuDeviceGet", (int) cuDeviceGet.invokeExact(dev, 0));
            int device = dev.get(JAVA_INT, 0);
            MemorySegment name = a.allocate(256);
            check("cuDeviceGetName", (int) cuDeviceGetName.invokeExact(name, 256, device));
            deviceName = name.getString(0);
            MemorySegment ctx = a.allocate(ADDRESS);
            check("cuDevicePrimaryCtxRetain", (int) cuDevicePrimaryCtxRetain.invokeExact(ctx, device));
            check("cuCtxSetCurrent", (int) cuCtxSetCurrent.invokeExact(ctx.get(ADDRESS, 0)));
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("CUDA initialisation failed: " + t);
        }
    }

    private static Optional<CudaDriver> load() {
        Optional<NativeLibrary> lib = NativeLibrary.open(List.of("libcuda.so.1", "libcuda.so", "nvcuda.dll"));
        if (lib.isEmpty()) {
            return Optional.empty();
        }
        try {
            return Optional.of(new CudaDriver(lib.get()));
        } catch (CudaException | UnsatisfiedLinkError e) {
            System.err.println("spindle: CUDA driver present but unusable: " + e.getMessage());
            return Optional.empty();
        }
    }

    /** The driver with a current context on device 0, or empty where there is none. */
    public static Optional<CudaDriver> get() {
        return INSTANCE;
    }

    public String deviceName() {
        return deviceName;
    }

    private void check(String call, int status) {
        if (status != 0) {
            String name = "CUDA error " + status;
            try (Arena a = Arena.ofConfined()) {
                MemorySegment p = a.allocate(ADDRESS);
                if (cuGetErrorName != null && (int) cuGetErrorName.invokeExact(status, p) == 0) {
                    name = p.get(ADDRESS, 0).reinterpret(128).getString(0);
                }
            } catch (Throwable ignored) {
                // keep the number
            }
            throw new CudaException(call + " failed: " + name);
        }
    }

    /** Loads a fatbin/cubin/PTX image; returns the module handle. */
    public MemorySegment loadModule(byte[] image) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment img = a.allocate(image.length + 1L);
            img.copyFrom(MemorySegment.ofArray(image));
            MemorySegment out = a.allocate(ADDRESS);
            check("cuModuleLoadData", (int) cuModuleLoadData.invokeExact(out, img));
            return out.get(ADDRESS, 0);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuModuleLoadData: " + t);
        }
    }

    public MemorySegment function(MemorySegment module, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuModuleGetFunction(" + name + ")", (int) cuModuleGetFunction.invokeExact(out, module, a.allocateFrom(name)));
            return out.get(ADDRESS, 0);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuModuleGetFunction(" + name + "): " + t);
        }
    }

    /** Device memory of {@code bytes}; returns its address. */
    public long alloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            check("cuMemAlloc(" + bytes + ")", (int) cuMemAlloc.invokeExact(out, bytes));
            return out.get(JAVA_LONG, 0);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuMemAlloc: " + t);
        }
    }

    public void free(long ptr) {
        try {
            check("cuMemFree", (int) cuMemFree.invokeExact(ptr));
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuMemFree: " + t);
        }
    }

    public void copyToDevice(long dst, MemorySegment src) {
        try {
            check("cuMemcpyHtoD", (int) cuMemcpyHtoD.invokeExact(dst, src, src.byteSize()));
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuMemcpyHtoD: " + t);
        }
    }

    public void copyToHost(MemorySegment dst, long src) {
        try {
            check("cuMemcpyDtoH", (int) cuMemcpyDtoH.invokeExact(dst, src, dst.byteSize()));
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuMemcpyDtoH: " + t);
        }
    }

    /**
     * Launches {@code f} on the default stream.
     *
     * @param args kernel arguments in order: Long (device pointer or long), Integer, Float
     */
    public void launch(MemorySegment f, int gx, int gy, int bx, Object... args) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(ADDRESS, args.length);
            for (int i = 0; i < args.length; i++) {
                MemorySegment v = switch (args[i]) {
                    case Long l -> a.allocateFrom(JAVA_LONG, l);
                    case Integer n -> a.allocateFrom(JAVA_INT, n);
                    case Float x -> a.allocateFrom(ValueLayout.JAVA_FLOAT, x);
                    default -> throw new IllegalArgumentException("kernel argument of type " + args[i].getClass());
                };
                params.setAtIndex(ADDRESS, i, v);
            }
            check("cuLaunchKernel", (int) cuLaunchKernel.invokeExact(f, gx, gy, 1, bx, 1, 1, 0, MemorySegment.NULL, params, MemorySegment.NULL));
            check("cuCtxSynchronize", (int) cuCtxSynchronize.invokeExact());
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuLaunchKernel: " + t);
        }
    }
}

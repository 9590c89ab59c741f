package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Kernel launches on one driver's stream: the arguments written into one reused parameter buffer (so launches come
 * from one thread at a time), then cuLaunchKernel, or cuLaunchKernelEx with programmatic stream serialization while
 * dependent launches are on.
 * <p>
 * While on (and on sm_90 or later), each kernel may be scheduled while the previous one finishes and waits for it on the
 * device (common.cuh's dependent_launch_entry), meant to hide the launch gaps between the small kernels of a decode step.
 * The forward pass turns it on while it captures a decode step's graph. Measured on the H200 against plain launches:
 * no difference beyond noise (docs/KERNELS.md, "Programmatic dependent launch").
 */
final class KernelLauncher {
    private static final int MAX_ARGS = 24;
    private final CudaDriver cuda;
    private final MethodHandle cuLaunchKernel, cuLaunchKernelEx;
    private final MemorySegment stream;
    private final boolean dependentSupported;
    private final MemorySegment params = Arena.global().allocate(ADDRESS, MAX_ARGS);
    private final MemorySegment values = Arena.global().allocate(8L * MAX_ARGS, 8);
    /** cuLaunchKernelEx's CUlaunchConfig (56 bytes) and one CUlaunchAttribute (72 bytes): programmatic stream serialization. */
    private final MemorySegment launchConfig = Arena.global().allocate(56 + 72, 8);
    private boolean dependentLaunches;

    KernelLauncher(CudaDriver cuda, NativeLibrary lib, MemorySegment stream, boolean dependentSupported) {
        this.cuda = cuda;
        this.stream = stream;
        this.dependentSupported = dependentSupported;
        cuLaunchKernel = lib.function("cuLaunchKernel", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT,
                JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        cuLaunchKernelEx = lib.function("cuLaunchKernelEx", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        for (int i = 0; i < MAX_ARGS; i++) {
            params.setAtIndex(ADDRESS, i, values.asSlice(8L * i, 8));
        }
    }

    /**
     * Launches {@code f} on the stream, asynchronously, a grid of gx x gy blocks of bx threads with {@code sharedBytes}
     * of dynamic shared memory.
     *
     * @param args kernel arguments in order: Long (device pointer or long), Integer, Float, Double
     */
    synchronized void launch(MemorySegment f, int gx, int gy, int bx, int sharedBytes, Object... args) {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case Long l -> values.set(JAVA_LONG, 8L * i, l);
                case Integer n -> values.set(JAVA_INT, 8L * i, n);
                case Float x -> values.set(JAVA_FLOAT, 8L * i, x);
                case Double x -> values.set(JAVA_DOUBLE, 8L * i, x);
                default -> throw new IllegalArgumentException("kernel argument of type " + args[i].getClass());
            }
        }
        try {
            if (dependentLaunches) {
                MemorySegment cfg = launchConfig;
                cfg.set(JAVA_INT, 0, gx);
                cfg.set(JAVA_INT, 4, gy);
                cfg.set(JAVA_INT, 8, 1);
                cfg.set(JAVA_INT, 12, bx);
                cfg.set(JAVA_INT, 16, 1);
                cfg.set(JAVA_INT, 20, 1);
                cfg.set(JAVA_INT, 24, sharedBytes);
                cfg.set(ADDRESS, 32, stream);
                cfg.set(ADDRESS, 40, cfg.asSlice(56, 72));
                cfg.set(JAVA_INT, 48, 1);
                cfg.set(JAVA_INT, 56, 6 /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */);
                cfg.set(JAVA_INT, 64, 1);
                cuda.check("cuLaunchKernelEx", (int) cuLaunchKernelEx.invokeExact(cfg, f, params, MemorySegment.NULL));
            } else {
                cuda.check("cuLaunchKernel", (int) cuLaunchKernel.invokeExact(f, gx, gy, 1, bx, 1, 1, sharedBytes, stream, params, MemorySegment.NULL));
            }
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cuLaunchKernel: " + t);
        }
    }

    /** Turns dependent launches on (where the device has them) or off; returns whether they were on. */
    synchronized boolean dependentLaunches(boolean on) {
        boolean was = dependentLaunches;
        dependentLaunches = on && dependentSupported;
        return was;
    }
}

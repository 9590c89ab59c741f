package dev.spindle.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * CUDA graphs of a driver's stream: a run of launches recorded (nothing runs while it is), instantiated once, launched
 * with {@link CudaDriver#launchGraph} as often as wanted, destroyed here.
 */
final class GraphCapture {
    private GraphCapture() {
    }

    /**
     * The stream's launches of {@code work} captured into an instantiated graph, Spindle's kernels launched with
     * programmatic dependent launch where {@code dependent} (restored after). If work throws, the capture is ended and
     * what it made destroyed before the error goes up.
     */
    static MemorySegment capture(CudaDriver cuda, boolean dependent, Runnable work) {
        cuda.call("cuStreamBeginCapture_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), cuda.stream(), 2 /* RELAXED */);
        boolean was = cuda.dependentLaunches(dependent);
        try {
            work.run();
        } catch (RuntimeException e) {
            try {
                destroy(cuda, end(cuda)); // leave the capture before the error goes up
            } catch (CudaException ignored) {
                // the capture was invalidated already: nothing was made
            }
            throw e;
        } finally {
            cuda.dependentLaunches(was);
        }
        return end(cuda);
    }

    /** Ends the recording; returns the instantiated, launchable graph. */
    private static MemorySegment end(CudaDriver cuda) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment graph = a.allocate(ADDRESS), exec = a.allocate(ADDRESS);
            cuda.call("cuStreamEndCapture", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), cuda.stream(), graph);
            cuda.call("cuGraphInstantiateWithFlags", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG), exec, graph.get(ADDRESS, 0), 0L);
            cuda.call("cuGraphDestroy", FunctionDescriptor.of(JAVA_INT, ADDRESS), graph.get(ADDRESS, 0));
            return exec.get(ADDRESS, 0);
        }
    }

    /** Frees an instantiated graph. */
    static void destroy(CudaDriver cuda, MemorySegment exec) {
        cuda.call("cuGraphExecDestroy", FunctionDescriptor.of(JAVA_INT, ADDRESS), exec);
    }

    /**
     * Seconds per call on the GPU, as in a decode step's graph: one untimed call (any lazy work of cuBLASLt's done outside
     * a capture), then {@code reps} calls captured into one graph (with programmatic dependent launch where
     * {@code dependent}), the best of two timed launches over reps; reps makes the graph about 200 us (2 to 16 calls).
     * Launched one by one, a kernel of a few microseconds times the host's launch path rather than itself
     * (docs/bench/CHOICES.md).
     */
    static double secondsPerCall(CudaDriver cuda, boolean dependent, Runnable call) {
        double once = cuda.time(call);
        int reps = (int) Math.max(2, Math.min(16, Math.ceil(200e-6 / Math.max(once, 1e-7))));
        MemorySegment graph = capture(cuda, dependent, () -> {
            for (int i = 0; i < reps; i++) {
                call.run();
            }
        });
        try {
            cuda.launchGraph(graph);
            double best = Double.MAX_VALUE;
            for (int i = 0; i < 2; i++) {
                best = Math.min(best, cuda.time(() -> cuda.launchGraph(graph)));
            }
            return best / reps;
        } finally {
            cuda.sync();
            destroy(cuda, graph);
        }
    }
}

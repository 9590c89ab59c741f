package dev.spindle.backend.cuda;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Captured CUDA graphs by the shape of what they launch (a key the owner makes from its step's sizes), at most
 * {@code capacity} of them: a shape beyond it runs kernel by kernel. Each graph is captured the first time its shape
 * runs and replayed after; the owner drops them all when a buffer they hold moves. It also keeps what the bench reads:
 * the last graph launched (replayed back to back, without the host between launches) and, when asked, the GPU's time
 * of each launch.
 */
final class GraphCache implements AutoCloseable {
    private final CudaDriver cuda;
    private final int capacity;
    private final Map<List<Integer>, MemorySegment> graphs = new HashMap<>();
    /** The graph launched last, or null (none yet, or dropped since). */
    private MemorySegment last;
    /** Whether each launch is timed on the GPU; its timing events, made on first use. */
    private boolean timed;
    private MemorySegment[] times;
    /** Whether the last launch was timed ({@link #lastLaunchSeconds}). */
    private boolean lastTimed;

    /** Whether captured launches use programmatic dependent launch (the full kernel set's kernels wait for it; the portable ones cannot). */
    private final boolean dependent;

    GraphCache(CudaDriver cuda, int capacity, boolean dependent) {
        this.cuda = cuda;
        this.dependent = dependent;
        this.capacity = capacity;
    }

    /**
     * The graph captured for {@code key}, captured now by {@code capture} at the key's first use; null where
     * {@code capacity} graphs are held already (the caller launches kernel by kernel). What capture throws goes up,
     * nothing kept.
     */
    MemorySegment graph(List<Integer> key, Supplier<MemorySegment> capture) {
        MemorySegment graph = graphs.get(key);
        if (graph == null && graphs.size() < capacity) {
            graph = capture.get();
            graphs.put(List.copyOf(key), graph);
        }
        return graph;
    }

    /**
     * Runs {@code launches} as the graph captured for {@code key} (at its first run, with programmatic dependent launch:
     * {@link CudaDriver#capture}), or kernel by kernel where {@code capacity} graphs are held.
     */
    void replay(List<Integer> key, Runnable launches) {
        MemorySegment graph = graph(key, () -> GraphCapture.capture(cuda, dependent, launches));
        if (graph == null) {
            launches.run();
        } else {
            launch(graph);
        }
    }

    /** Launches one of this cache's graphs on the current stream (between timing events when {@link #time} is on). */
    void launch(MemorySegment graph) {
        lastTimed = timed;
        if (timed) {
            cuda.record(times[0]);
        }
        cuda.launchGraph(graph);
        if (timed) {
            cuda.record(times[1]);
        }
        last = graph;
    }

    /** Whether each launch from now on is timed on the GPU (the bench). */
    void time(boolean on) {
        if (on && times == null) {
            times = new MemorySegment[]{cuda.createTimingEvent(), cuda.createTimingEvent()};
        }
        timed = on;
    }

    /** The GPU's seconds of the last launch (waits for it), or -1 when it was not timed. */
    double lastLaunchSeconds() {
        return lastTimed ? cuda.elapsedSeconds(times[0], times[1]) : -1;
    }

    /** Whether a graph was launched and is still held ({@link #replayLast} has one to replay). */
    boolean launchedAny() {
        return last != null;
    }

    /** The last graph launched, {@code n} times back to back, then one wait: seconds a replay. */
    double replayLast(int n) {
        if (last == null) {
            throw new IllegalStateException("no CUDA graph was launched, or those launched were dropped since");
        }
        cuda.sync();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            cuda.launchGraph(last);
        }
        cuda.sync();
        return (System.nanoTime() - t0) / 1e9 / n;
    }

    /** Destroys every graph held, once the device has finished what it launched (a buffer one holds has moved, or a switch). */
    void drop() {
        cuda.sync();
        graphs.values().forEach(g -> GraphCapture.destroy(cuda, g));
        graphs.clear();
        last = null;
    }

    @Override
    public void close() {
        drop();
        if (times != null) {
            for (MemorySegment e : times) {
                cuda.destroyEvent(e);
            }
            times = null;
        }
    }
}

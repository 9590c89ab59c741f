package dev.spindle.backend.cpu;

import jdk.incubator.vector.FloatVector;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.DoubleAdder;

import static dev.spindle.backend.cpu.Bf16Vectors.F;

/**
 * The machine's memory read bandwidth as the CPU backend sees it: all threads stream
 * a buffer far larger than the caches with vector loads. The denominator for the
 * decode benchmark's "fraction of bandwidth".
 */
public final class MemoryBandwidth {
    private MemoryBandwidth() {
    }

    /** Best of {@code repeats} passes over {@code bytes} bytes, in GB/s (1e9). */
    public static double readGBs(int threads, long bytes, int repeats) {
        int step = F.vectorByteSize();
        long chunk = 1 << 20;
        int chunks = (int) (bytes / chunk);
        try (Arena arena = Arena.ofShared(); Parallel parallel = new Parallel(threads)) {
            MemorySegment buf = arena.allocate((long) chunks * chunk, 64);
            buf.fill((byte) 1);
            double best = 0;
            DoubleAdder sink = new DoubleAdder();
            for (int r = 0; r < repeats; r++) {
                long t0 = System.nanoTime();
                parallel.forRange(chunks, 1, (c0, c1) -> {
                    FloatVector a0 = FloatVector.zero(F), a1 = FloatVector.zero(F);
                    for (long off = (long) c0 * chunk; off < (long) c1 * chunk; off += 2L * step) {
                        a0 = a0.add(FloatVector.fromMemorySegment(F, buf, off, ByteOrder.LITTLE_ENDIAN));
                        a1 = a1.add(FloatVector.fromMemorySegment(F, buf, off + step, ByteOrder.LITTLE_ENDIAN));
                    }
                    sink.add(a0.add(a1).reduceLanes(jdk.incubator.vector.VectorOperators.ADD));
                });
                best = Math.max(best, (double) chunks * chunk / ((System.nanoTime() - t0) / 1e9) / 1e9);
            }
            if (sink.sum() == 42) {
                System.out.print(""); // keeps the loads alive
            }
            return best;
        }
    }
}

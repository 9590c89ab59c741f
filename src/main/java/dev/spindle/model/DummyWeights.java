package dev.spindle.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;

/**
 * Seeded random bf16 weights of a config's exact shapes, for benchmarks without a
 * download. Linear weights are uniform with variance 1/in, norms near 1, the
 * embedding uniform in [-1, 1): activations stay in a realistic range.
 * The same seed gives the same bytes on every machine.
 */
public final class DummyWeights {
    private static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final long CHUNK = 1 << 20;

    private DummyWeights() {
    }

    public static ModelWeights create(ModelConfig config, long seed, Arena arena, LoadListener listener) {
        Map<String, long[]> layout = WeightLayout.expected(config);
        long total = layout.values().stream().mapToLong(s -> elements(s) * 2).sum();
        AtomicLong done = new AtomicLong();
        Map<String, Tensor> out = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : layout.entrySet()) {
            String name = e.getKey();
            long[] shape = e.getValue();
            long n = elements(shape);
            MemorySegment seg = arena.allocate(n * 2, 64);
            boolean norm = shape.length == 1;
            float scale = norm ? 0.1f : name.equals(WeightLayout.EMBED) ? 1f : (float) Math.sqrt(3.0 / shape[1]);
            float center = norm ? 1f : 0f;
            long tensorSeed = seed * 0x9E3779B97F4A7C15L ^ name.hashCode();
            int chunks = (int) ((n + CHUNK - 1) / CHUNK);
            IntStream.range(0, chunks).parallel().forEach(c -> {
                long state = mix(tensorSeed + c);
                long end = Math.min(n, (c + 1) * CHUNK);
                for (long i = c * CHUNK; i < end; i++) {
                    state ^= state << 13;
                    state ^= state >>> 7;
                    state ^= state << 17;
                    float u = ((state >>> 40) * 0x1.0p-24f) * 2f - 1f; // uniform [-1, 1)
                    seg.setAtIndex(SHORT_LE, i, Bf16.fromFloat(center + scale * u));
                }
            });
            out.put(name, new Tensor(name, shape, seg));
            listener.loaded(name, done.addAndGet(n * 2), total);
        }
        return WeightLayout.assemble(config, out);
    }

    private static long elements(long[] shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        z = z ^ (z >>> 31);
        return z == 0 ? 1 : z;
    }
}

package dev.spindle;

import org.junit.jupiter.api.function.ThrowingConsumer;

import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Function;
import java.util.random.RandomGenerator;
import java.util.stream.Collectors;

/**
 * Property tests on plain JUnit: a property is checked on N trials, each generating its input from a
 * {@link SplittableRandom} of its own seed. A failing trial is reported with its seed and its input, and
 * {@code -Dtest=Class#method -Dspindle.seed=<seed>} replays that one trial. The trials' seeds come from a new base
 * seed each run, so that repeated runs keep exploring new inputs.
 * <p>
 * Also the generator primitives the tests share. Plain uniform draws rarely hit the edges of a range (0, 1, the
 * bounds, the empty list), where most bugs live, so these draw them often on purpose.
 */
public final class Trials {
    /** The system property naming one trial's seed (decimal, or hex with 0x) to run alone instead of N trials. */
    public static final String SEED = "spindle.seed";

    private Trials() {
    }

    /** Checks {@code property} on the inputs {@code generate} makes from {@code trials} seeds (or from the replayed one). */
    public static <T> void forAll(int trials, Function<? super SplittableRandom, ? extends T> generate, ThrowingConsumer<? super T> property) {
        check(trials, generate, property, Trials::describe);
    }

    /** Checks a property that draws its own inputs from each trial's random source. */
    public static void run(int trials, ThrowingConsumer<? super SplittableRandom> property) {
        check(trials, r -> r, property, r -> "drawn inside the property from the seed");
    }

    private static <T> void check(int trials, Function<? super SplittableRandom, ? extends T> generate, ThrowingConsumer<? super T> property,
                                  Function<Object, String> describe) {
        String replay = System.getProperty(SEED);
        SplittableRandom seeds = new SplittableRandom();
        int n = replay == null ? trials : 1;
        for (int i = 0; i < n; i++) {
            long seed = replay == null ? seeds.nextLong() : Long.decode(replay);
            T input = null;
            try {
                input = generate.apply(new SplittableRandom(seed));
                property.accept(input);
            } catch (Throwable failure) {
                StackWalker.StackFrame test = StackWalker.getInstance().walk(s -> s.filter(f -> !f.getClassName().equals(Trials.class.getName())
                        && !f.getMethodName().startsWith("lambda$")).findFirst().orElseThrow());
                String name = test.getClassName().substring(test.getClassName().lastIndexOf('.') + 1) + "#" + test.getMethodName();
                throw new AssertionError(String.format("trial %d of %d failed, seed %d; replay it with -Dtest=%s -D%s=%d%n  input: %s%n  %s",
                        i + 1, n, seed, name, SEED, seed, input == null ? "(not generated)" : describe.apply(input), failure), failure);
            }
        }
    }

    /** An input as a reader wants it: arrays and records with arrays in them spelled out. */
    public static String describe(Object o) {
        if (o == null) {
            return "null";
        }
        if (o.getClass().isArray()) {
            String s = Arrays.deepToString(new Object[]{o});
            return s.substring(1, s.length() - 1);
        }
        if (o instanceof Collection<?> c) {
            return c.stream().map(Trials::describe).collect(Collectors.joining(", ", "[", "]"));
        }
        if (o instanceof Record) {
            List<String> parts = new ArrayList<>();
            for (RecordComponent rc : o.getClass().getRecordComponents()) {
                try {
                    parts.add(rc.getName() + "=" + describe(rc.getAccessor().invoke(o)));
                } catch (ReflectiveOperationException e) {
                    parts.add(rc.getName() + "=?");
                }
            }
            return o.getClass().getSimpleName() + parts.stream().collect(Collectors.joining(", ", "[", "]"));
        }
        return o.toString();
    }

    /**
     * A long in [min, max]: one draw in eight an edge (the bounds, one inside each, and -1, 0, 1 where in range), one in
     * four small (near the value closest to 0, off by a number of uniformly drawn bit length), else uniform. max - min + 1
     * must fit in a long.
     */
    public static long between(RandomGenerator r, long min, long max) {
        long count = Math.addExact(Math.subtractExact(max, min), 1);
        int kind = r.nextInt(8);
        if (kind == 0) {
            long e = oneOf(r, min, max, min + 1, max - 1, -1L, 0L, 1L);
            return e >= min && e <= max ? e : min;
        }
        if (kind <= 2) {
            long target = Math.clamp(0, min, max);
            boolean up = target == min || target != max && r.nextBoolean();
            long room = up ? max - target : target - min;
            int bits = r.nextInt(64 - Long.numberOfLeadingZeros(room) + 1);
            long offset = bits == 0 ? 0 : r.nextLong(1L << (bits - 1), Math.min(room, (1L << bits) - 1) + 1);
            return up ? target + offset : target - offset;
        }
        return min + r.nextLong(count);
    }

    /** An int in [min, max], biased as {@link #between(RandomGenerator, long, long)}. */
    public static int between(RandomGenerator r, int min, int max) {
        return (int) between(r, (long) min, (long) max);
    }

    /** A double in [min, max]: one draw in eight a bound (or 0 where in range), else uniform. */
    public static double between(RandomGenerator r, double min, double max) {
        if (r.nextInt(8) == 0) {
            double[] edges = {min, max, 0};
            double e = edges[r.nextInt(edges.length)];
            return e >= min && e <= max ? e : min;
        }
        return min + r.nextDouble() * (max - min);
    }

    /** One of the values, uniformly. */
    @SafeVarargs
    public static <T> T oneOf(RandomGenerator r, T... values) {
        return values[r.nextInt(values.length)];
    }

    public static <T> T oneOf(RandomGenerator r, List<T> values) {
        return values.get(r.nextInt(values.size()));
    }

    /** An index into {@code weights}, drawn in proportion to them: {@code switch (frequency(r, 6, 2, 1))}. */
    public static int frequency(RandomGenerator r, int... weights) {
        int u = r.nextInt(Arrays.stream(weights).sum());
        int i = 0;
        while (u >= weights[i]) {
            u -= weights[i++];
        }
        return i;
    }

    /** A list of minSize to maxSize elements (the size biased as {@link #between(RandomGenerator, int, int)}: empty and full often). */
    public static <T> List<T> listOf(RandomGenerator r, int minSize, int maxSize, Function<? super RandomGenerator, ? extends T> element) {
        int n = between(r, minSize, maxSize);
        List<T> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(element.apply(r));
        }
        return out;
    }

    /** An array of minSize to maxSize ints in [min, max], sizes and values biased as {@link #between(RandomGenerator, int, int)}. */
    public static int[] ints(RandomGenerator r, int minSize, int maxSize, int min, int max) {
        int[] a = new int[between(r, minSize, maxSize)];
        for (int i = 0; i < a.length; i++) {
            a[i] = between(r, min, max);
        }
        return a;
    }
}

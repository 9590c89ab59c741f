package dev.spindle.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks a checkpoint against the layout its config implies and binds its tensors:
 * bf16 tensors are used in place (the file mapping, paged in now so the first request
 * does not pay for it, or left for a device backend's upload to read: {@link HostReads});
 * f16 and f32 tensors are converted to bf16 off-heap.
 */
public final class WeightBinder {
    private static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private WeightBinder() {
    }

    public static ModelWeights bind(ModelConfig config, Checkpoint ckpt, Arena arena, LoadListener listener) {
        return bind(config, ckpt, arena, listener, HostReads.AT_LOAD);
    }

    public static ModelWeights bind(ModelConfig config, Checkpoint ckpt, Arena arena, LoadListener listener, HostReads reads) {
        return bind(config, null, ckpt, arena, listener, reads);
    }

    /** As {@link #bind(ModelConfig, Checkpoint, Arena, LoadListener, HostReads)} for a checkpoint stored quantized as {@code quant} says (null: not). */
    public static ModelWeights bind(ModelConfig config, CheckpointQuantization quant, Checkpoint ckpt, Arena arena, LoadListener listener,
                                    HostReads reads) {
        return bind(config, quant, null, ckpt, arena, listener, reads);
    }

    /**
     * As above, with an MLX-quantized checkpoint's linear layers ({@code mlx} non-null: config.json's
     * {@code quantization}) bound in their packed form and its quantized embedding expanded to bf16.
     */
    public static ModelWeights bind(ModelConfig config, CheckpointQuantization quant, MlxCheckpoints.Plan mlx, Checkpoint ckpt, Arena arena,
                                    LoadListener listener, HostReads reads) {
        Map<String, long[]> expected = new LinkedHashMap<>(WeightLayout.expected(config));
        Map<String, Matrix> fp8 = Fp8Checkpoints.bind(quant, expected, ckpt, arena, reads);
        fp8.keySet().forEach(expected::remove);
        Map<String, Matrix> stored = new LinkedHashMap<>(fp8);
        Map<String, Tensor> expanded = new LinkedHashMap<>();
        if (mlx != null) {
            MlxCheckpoints.bind(mlx, expected, ckpt, arena, stored, expanded);
            stored.keySet().forEach(expected::remove);
            expanded.keySet().forEach(expected::remove);
        }
        Map<String, Tensor> bound = new LinkedHashMap<>(bindAll(config.architecture(), expected,
                n -> WeightLayout.ignorable(n) || (config.tiedEmbeddings() && n.equals(WeightLayout.LM_HEAD)) || stored.containsKey(n)
                        || expanded.containsKey(n) || (quant != null && (quant.unused(n) || fp8.containsKey(quant.partOf(n))))
                        || (mlx != null && MlxCheckpoints.isPart(n, stored.keySet(), expanded.keySet())),
                ckpt, arena, listener, reads));
        bound.putAll(expanded);
        return WeightLayout.assemble(config, bound, stored);
    }

    /**
     * Checks a checkpoint against the tensors a model needs (every one present with its shape, nothing
     * else but what {@code ignorable} allows) and binds them as bf16 (BF16 in place, F16/F32 converted).
     *
     * @param what     the model, for messages
     * @param expected checkpoint name -> shape, in binding order
     */
    public static Map<String, Tensor> bindAll(String what, Map<String, long[]> expected, java.util.function.Predicate<String> ignorable,
                                              Checkpoint ckpt, Arena arena, LoadListener listener) {
        return bindAll(what, expected, ignorable, ckpt, arena, listener, HostReads.AT_LOAD);
    }

    /** As {@link #bindAll(String, Map, java.util.function.Predicate, Checkpoint, Arena, LoadListener)}, read into memory when {@code reads} says. */
    public static Map<String, Tensor> bindAll(String what, Map<String, long[]> expected, java.util.function.Predicate<String> ignorable,
                                              Checkpoint ckpt, Arena arena, LoadListener listener, HostReads reads) {
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            TensorInfo info = ckpt.tensors().get(e.getKey());
            if (info == null) {
                missing.add(e.getKey() + " " + Arrays.toString(e.getValue()));
            } else if (!Arrays.equals(info.shape(), e.getValue())) {
                throw new ModelLoadException(info.file() + ": tensor '" + e.getKey() + "' has shape " + info.shapeString()
                        + ", expected " + Arrays.toString(e.getValue()) + " from config.json");
            }
        }
        if (!missing.isEmpty()) {
            throw new ModelLoadException("checkpoint is missing " + missing.size() + " tensor(s) the config needs: "
                    + String.join(", ", missing.subList(0, Math.min(8, missing.size()))) + (missing.size() > 8 ? ", ..." : ""));
        }
        List<String> unexpected = ckpt.tensors().keySet().stream()
                .filter(n -> !expected.containsKey(n) && !ignorable.test(n))
                .toList();
        if (!unexpected.isEmpty()) {
            TensorInfo first = ckpt.tensors().get(unexpected.getFirst());
            throw new ModelLoadException(first.file() + ": " + unexpected.size() + " unexpected tensor(s) for " + what
                    + " (" + String.join(", ", unexpected.subList(0, Math.min(8, unexpected.size()))) + (unexpected.size() > 8 ? ", ..." : "")
                    + "); they would change the math, and Spindle does not implement them");
        }
        long total = expected.keySet().stream().mapToLong(n -> ckpt.tensors().get(n).elements() * 2).sum();
        Map<String, Tensor> bound = new LinkedHashMap<>();
        for (String name : expected.keySet()) {
            TensorInfo info = ckpt.tensors().get(name);
            MemorySegment raw = ckpt.bytes(info);
            MemorySegment bf16 = switch (info.dtype()) {
                case BF16 -> raw;
                case F16 -> convert(raw, info, arena, true);
                case F32 -> convert(raw, info, arena, false);
                case F8_E4M3 -> throw new ModelLoadException(info.file() + ": tensor '" + name + "' is F8_E4M3, but config.json's"
                        + " quantization_config does not say it is stored quantized (or there is none), so its scales are unknown");
                case BLOCKS -> throw new IllegalStateException(name + ": no safetensors dtype reads as ggml blocks");
                case U32 -> throw new ModelLoadException(info.file() + ": tensor '" + name + "' is U32 (packed codes), but config.json's"
                        + " quantization (MLX's group_size and bits) does not say it is stored quantized (or there is none)");
                case I16, I32 -> throw new ModelLoadException(info.file() + ": tensor '" + name + "' is " + info.dtype() + ", not a float"
                        + " weight (an EXL3 checkpoint stores its linear layers as .trellis, .suh and .svh, and config.json says quant_method exl3)");
                case U8 -> throw new ModelLoadException(info.file() + ": tensor '" + name + "' is U8 (packed codes), but config.json's"
                        + " quantization_config does not say it is stored quantized (or there is none)");
            };
            bound.put(name, new Tensor(name, info.shape(), bf16));
        }
        if (reads == HostReads.AT_LOAD) {
            prefault(List.copyOf(bound.values()), total, listener);
        }
        return bound;
    }

    /** Threads that read mapped tensors into memory at once. */
    static final int PREFAULT_THREADS = Math.max(1, Math.min(8, Runtime.getRuntime().availableProcessors()));

    /**
     * Reads every mapped tensor's pages into memory (from the page cache or the disk), so that the first
     * forward pass does not fault them in one by one, reporting progress as tensors complete. Several
     * threads take the tensors in turn: one thread faulting pages in (about 17 GB/s measured on the H200
     * machine from the page cache) was most of a 33B start.
     */
    private static void prefault(List<Tensor> tensors, long total, LoadListener listener) {
        java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        long[] done = {0};
        // tensors of a thread-confined arena are read by this thread alone
        Thread probe = Thread.ofPlatform().unstarted(() -> { });
        int n = tensors.stream().allMatch(t -> t.data().isAccessibleBy(probe)) ? Math.min(PREFAULT_THREADS, tensors.size()) : 1;
        LoadThreads.run(n, "spindle-prefault", "reading the weights", failed -> {
            for (int i = next.getAndIncrement(); i < tensors.size() && !failed.getAsBoolean(); i = next.getAndIncrement()) {
                Tensor t = tensors.get(i);
                if (t.data().isMapped()) {
                    t.data().load();
                }
                synchronized (done) {
                    done[0] += t.data().byteSize();
                    listener.loaded(t.name(), done[0], total);
                }
            }
        });
    }

    private static MemorySegment convert(MemorySegment raw, TensorInfo info, Arena arena, boolean half) {
        long n = info.elements();
        MemorySegment out = arena.allocate(n * 2, 64);
        for (long i = 0; i < n; i++) {
            float f = half ? Bf16.halfToFloat(raw.getAtIndex(SHORT_LE, i)) : raw.getAtIndex(FLOAT_LE, i);
            out.setAtIndex(SHORT_LE, i, Bf16.fromFloat(f));
        }
        return out;
    }
}

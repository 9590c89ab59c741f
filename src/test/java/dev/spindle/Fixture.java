package dev.spindle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.model.Bf16;
import dev.spindle.model.DType;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.HostReads;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import dev.spindle.model.SafetensorsFile;
import dev.spindle.model.TensorInfo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A committed HF reference fixture (made by scripts/make_fixtures.py): the model
 * directory plus HF's teacher-forced logits and greedy continuations.
 */
public final class Fixture implements AutoCloseable {
    public static final Path ROOT = Path.of("src/test/resources/fixtures");
    public static final List<String> NAMES = List.of("llama-gqa", "llama-headdim-sharded", "nanbeige-looped");

    public final String name;
    public final LoadedModel model;
    public final List<int[]> prompts = new ArrayList<>();
    /** HF bf16 sdpa's greedy continuations (the parity gate compares with them; the eager ones stay in the file as data). */
    public final List<int[]> greedySdpa = new ArrayList<>();
    private final Arena arena = Arena.ofConfined();
    private final SafetensorsFile reference;

    public Fixture(String name) {
        this(name, ROOT.resolve(name));
    }

    public Fixture(String name, Path dir) {
        this(name, dir, Quantization.NONE);
    }

    /** The fixture with its linear layers quantized at load as {@code q} says. */
    public Fixture(String name, Quantization q) {
        this(name, ROOT.resolve(name), q);
    }

    public Fixture(String name, Path dir, Quantization q) {
        this.name = name;
        this.model = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, q);
        this.reference = SafetensorsFile.open(dir.resolve("reference.safetensors"), arena);
        try {
            JsonNode j = new ObjectMapper().readTree(dir.resolve("reference.json").toFile());
            j.get("prompts").forEach(p -> prompts.add(ints(p)));
            j.get("greedy_sdpa").forEach(p -> greedySdpa.add(ints(p)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    public CpuForwardPass cpu(KvSlots slots) {
        return new CpuForwardPass(model.config(), model.weights(), 64, 16, Runtime.getRuntime().availableProcessors(), slots);
    }

    public CpuForwardPass cpu() {
        return cpu(KvSlots.PER_EXECUTED_LAYER);
    }

    /** A pass whose KV cache stores K and V as {@code kv}. */
    public CpuForwardPass cpu(KvDtype kv) {
        return new CpuForwardPass(model.config(), model.weights(), 64, 16, Runtime.getRuntime().availableProcessors(), KvSlots.PER_EXECUTED_LAYER, 1, kv);
    }

    /** A (rows, cols) reference tensor, f32 or bf16 (stored so where its values are bf16 ones). */
    public float[][] matrix(String tensor) {
        return matrix(reference, tensor);
    }

    /** A (rows, cols) f32 or bf16 tensor of {@code file}. */
    public static float[][] matrix(SafetensorsFile file, String tensor) {
        TensorInfo info = file.tensors().get(tensor);
        if (info == null) {
            throw new IllegalArgumentException("no tensor " + tensor + " in the reference");
        }
        MemorySegment s = file.bytes(info);
        int rows = (int) info.shape()[0], cols = (int) info.shape()[1];
        boolean bf16 = info.dtype() == DType.BF16;
        float[][] out = new float[rows][cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                long i = (long) r * cols + c;
                out[r][c] = bf16 ? Bf16.toFloat(s.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i))
                        : s.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
            }
        }
        return out;
    }

    /** A reference file on its own (a fixture without a model directory of its own). */
    public record References(Arena arena, SafetensorsFile file) implements AutoCloseable {
        public static References open(Path path) {
            Arena a = Arena.ofConfined();
            return new References(a, SafetensorsFile.open(path, a));
        }

        public float[][] matrix(String tensor) {
            return Fixture.matrix(file, tensor);
        }

        @Override
        public void close() {
            arena.close();
        }
    }

    @Override
    public void close() {
        model.close();
        arena.close();
    }
}

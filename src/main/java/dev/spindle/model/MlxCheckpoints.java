package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.Set;

/**
 * Checkpoints mlx-lm quantized: config.json's {@code quantization} ({@code group_size}, {@code bits}, {@code mode}). Mode
 * "affine" (or absent): each quantized module's {@code weight} U32 beside its {@code scales} and {@code biases}
 * ({@link MlxMatrix}). Mode "nvfp4" (group 16, 4 bits): {@code weight} U32 (E2M1 codes, eight a word, the first lowest) and
 * {@code scales} U8 (E4M3), no biases and no tensor scale ({@link Nvfp4Matrix}). The linear layers bind in place; a
 * quantized embedding is expanded to bf16 (it is read a row at a time; a tied head reads the same values). mlx-lm's
 * per-module entries (its mixed recipes: {@code "<module path>": {group_size, bits[, mode]}}, or {@code false} for a module
 * left bf16) give that module its own mode ({@link Plan}); the other modes (mxfp4, mxfp8) are refused by field.
 */
public final class MlxCheckpoints {
    private MlxCheckpoints() {
    }

    /** An MLX quantization mode, as config.json's {@code quantization} names it. */
    public sealed interface Mode permits Affine, Nvfp4 {
        int groupSize();

        int bits();
    }

    /** mlx-lm's affine quantization: codes of {@code bits} bits, a scale and a bias per {@code groupSize} columns. */
    public record Affine(int groupSize, int bits) implements Mode {
    }

    /** MLX's nvfp4 mode: E2M1 codes, an E4M3 scale a group of 16. */
    public record Nvfp4() implements Mode {
        @Override
        public int groupSize() {
            return Nvfp4Matrix.GROUP;
        }

        @Override
        public int bits() {
            return 4;
        }
    }

    /**
     * A checkpoint's MLX quantization: {@code base} for every quantized module, except those {@code modules} names (mlx-lm's
     * per-module entries, by module path: their own mode, or null for a module left unquantized).
     */
    public record Plan(Mode base, Map<String, Mode> modules) {
        /** The mode of the module whose weight is {@code weightName} ({@code <module>.weight}); null: not quantized. */
        public Mode modeOf(String weightName) {
            String module = weightName.endsWith(".weight") ? weightName.substring(0, weightName.length() - ".weight".length()) : weightName;
            return modules.containsKey(module) ? modules.get(module) : base;
        }
    }

    /** config.json's MLX quantization, or null where it has none. */
    public static Plan parse(JsonNode config) {
        JsonNode q = config.get("quantization");
        if (q == null || q.isNull()) {
            return null;
        }
        if (!q.isObject() || !q.has("group_size") || !q.has("bits")) {
            throw new ModelLoadException("config: field 'quantization' = " + q + " (MLX's: an object with group_size and bits)");
        }
        Mode base = mode(q, "quantization", q.path("mode").asText("affine"), q.get("group_size").asInt(), q.get("bits").asInt());
        Map<String, Mode> modules = new java.util.LinkedHashMap<>();
        for (var it = q.fields(); it.hasNext(); ) {
            var f = it.next();
            if (Set.of("group_size", "bits", "mode").contains(f.getKey())) {
                continue;
            }
            JsonNode o = f.getValue();
            String where = "quantization." + f.getKey();
            if (o.isBoolean() && !o.asBoolean()) {
                modules.put(f.getKey(), null); // mlx-lm: this module stays unquantized
            } else if (o.isObject()) {
                for (var fields = o.fieldNames(); fields.hasNext(); ) {
                    String g = fields.next();
                    if (!Set.of("group_size", "bits", "mode").contains(g)) {
                        throw new ModelLoadException("config: field '" + where + "." + g + "' is not an MLX quantization setting (group_size, bits, mode)");
                    }
                }
                modules.put(f.getKey(), mode(o, where, o.path("mode").asText(q.path("mode").asText("affine")),
                        o.path("group_size").asInt(base.groupSize()), o.path("bits").asInt(base.bits())));
            } else {
                throw new ModelLoadException("config: field '" + where + "' = " + o + " (a per-module entry is false or an object with group_size"
                        + " and bits)");
            }
        }
        return new Plan(base, java.util.Collections.unmodifiableMap(modules));
    }

    private static Mode mode(JsonNode q, String where, String mode, int gs, int bits) {
        if (!mode.equals("affine") && !mode.equals("nvfp4")) {
            throw new ModelLoadException("config: field '" + where + ".mode' = '" + mode + "' is not a mode Spindle reads (affine, nvfp4)");
        }
        if (mode.equals("nvfp4")) {
            if (gs != Nvfp4Matrix.GROUP || bits != 4) {
                throw new ModelLoadException("config: field '" + where + "' = " + q + ": MLX's nvfp4 mode has groups of 16 and 4 bits");
            }
            return new Nvfp4();
        }
        if (!Set.of(32, 64, 128).contains(gs) || !Set.of(2, 3, 4, 5, 6, 8).contains(bits)) {
            throw new ModelLoadException("config: field '" + where + "' = " + q + ": MLX's affine scheme has group sizes 32, 64, 128 and 2 to 6 or 8 bits");
        }
        return new Affine(gs, bits);
    }

    /** Whether config.json's quantization_config is MLX's copy of its quantization (no quant_method), which {@link #parse} reads. */
    static boolean isMlxConfig(JsonNode quantizationConfig) {
        return !quantizationConfig.has("quant_method") && quantizationConfig.has("group_size") && quantizationConfig.has("bits");
    }

    /** Whether tensor n is the scales or biases of a module bound here. */
    static boolean isPart(String n, Set<String> stored, Set<String> expanded) {
        for (String suffix : new String[]{".scales", ".biases"}) {
            if (n.endsWith(suffix)) {
                String w = n.substring(0, n.length() - suffix.length()) + ".weight";
                return stored.contains(w) || expanded.contains(w);
            }
        }
        return false;
    }

    /**
     * Binds every expected two-dimensional weight stored as U32 codes: linear layers into {@code stored}, the embedding
     * ({@link WeightLayout#EMBED}) expanded into {@code expanded}.
     */
    static void bind(Plan plan, Map<String, long[]> expected, Checkpoint ckpt, Arena arena, Map<String, Matrix> stored, Map<String, Tensor> expanded) {
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            String name = e.getKey();
            TensorInfo info = ckpt.tensors().get(name);
            Mode q = plan.modeOf(name);
            if (info == null || info.dtype() != DType.U32 || e.getValue().length != 2) {
                continue;
            }
            if (q == null) {
                throw new ModelLoadException(info.file() + ": tensor '" + name + "' is U32 (packed codes), but config.json's quantization"
                        + " says its module is not quantized (false)");
            }
            long rows = e.getValue()[0], cols = e.getValue()[1];
            if (cols * q.bits() % 32 != 0 || cols % q.groupSize() != 0 || info.shape().length != 2 || info.shape()[0] != rows
                    || info.shape()[1] != cols * q.bits() / 32) {
                throw new ModelLoadException(info.file() + ": tensor '" + name + "' has shape " + info.shapeString() + ", expected [" + rows + ", "
                        + cols * q.bits() / 32 + "] U32 (" + cols + " columns of " + q.bits() + " bits)");
            }
            String base = name.substring(0, name.length() - ".weight".length());
            Tensor codes = new Tensor(name, DType.U32, info.shape(), ckpt.bytes(info));
            if (q instanceof Nvfp4) {
                bindNvfp4(name, info, codes, ckpt, (int) rows, (int) cols, arena, stored, expanded);
                continue;
            }
            Tensor[] sb = new Tensor[2];
            String[] parts = {base + ".scales", base + ".biases"};
            for (int i = 0; i < 2; i++) {
                TensorInfo s = ckpt.tensors().get(parts[i]);
                if (s == null) {
                    throw new ModelLoadException(info.file() + ": tensor '" + name + "' is MLX-quantized but '" + parts[i] + "' is missing");
                }
                if (s.shape().length != 2 || s.shape()[0] != rows || s.shape()[1] != cols / q.groupSize()
                        || (s.dtype() != DType.BF16 && s.dtype() != DType.F16 && s.dtype() != DType.F32)) {
                    throw new ModelLoadException(s.file() + ": tensor '" + parts[i] + "' is " + s.dtype() + " " + s.shapeString() + ", expected ["
                            + rows + ", " + cols / q.groupSize() + "] floats");
                }
                sb[i] = new Tensor(parts[i], s.dtype(), s.shape(), ckpt.bytes(s));
            }
            MlxMatrix m = new MlxMatrix(codes, sb[0], sb[1], (int) cols, q.groupSize(), q.bits());
            if (name.equals(WeightLayout.EMBED)) {
                expanded.put(name, expand(m, m::expand, arena));
            } else {
                stored.put(name, m);
            }
        }
    }

    private static void bindNvfp4(String name, TensorInfo info, Tensor codes, Checkpoint ckpt, int rows, int cols, Arena arena,
                                  Map<String, Matrix> stored, Map<String, Tensor> expanded) {
        String scalesName = name.substring(0, name.length() - "weight".length()) + "scales";
        TensorInfo s = ckpt.tensors().get(scalesName);
        if (s == null) {
            throw new ModelLoadException(info.file() + ": tensor '" + name + "' is MLX nvfp4 but '" + scalesName + "' is missing");
        }
        if (s.shape().length != 2 || s.shape()[0] != rows || s.shape()[1] != cols / Nvfp4Matrix.GROUP || s.dtype() != DType.U8) {
            throw new ModelLoadException(s.file() + ": tensor '" + scalesName + "' is " + s.dtype() + " " + s.shapeString() + ", expected ["
                    + rows + ", " + cols / Nvfp4Matrix.GROUP + "] U8 (E4M3 scales)");
        }
        Tensor scales = new Tensor(scalesName, DType.F8_E4M3, s.shape(), ckpt.bytes(s));
        Nvfp4Matrix m = new Nvfp4Matrix(codes, scales, 1f, false, cols);
        if (name.equals(WeightLayout.EMBED)) {
            expanded.put(name, expand(m, m::expand, arena));
        } else {
            stored.put(name, m);
        }
    }

    /** A matrix's rows as the bf16 values a linear layer reads. */
    private interface Rows {
        void expand(int i, int col, int k, float[] out);
    }

    /** The whole matrix as bf16 (the values a linear layer reads). */
    private static Tensor expand(Matrix m, Rows rows, Arena arena) {
        MemorySegment out = arena.allocate(2L * m.rows() * m.cols(), 64);
        float[] row = new float[m.cols()];
        ValueLayout.OfShort bf16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < m.rows(); i++) {
            rows.expand(i, 0, m.cols(), row);
            for (int j = 0; j < row.length; j++) {
                out.setAtIndex(bf16, (long) i * m.cols() + j, Bf16.fromFloat(row[j]));
            }
        }
        return new Tensor(m.name(), new long[]{m.rows(), m.cols()}, out);
    }
}

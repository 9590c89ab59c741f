package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.regex.Pattern;

/**
 * Quantized checkpoints of a bf16 model written at test time (no fixture to commit), the model's tokenizer, template and
 * generation files beside: MLX affine as mlx-lm saves it, its linear layers and head packed by {@link AffineQuantizer} (bit
 * for bit as scripts/make_mlx_fixture.py packs them), the embedding and norms bf16, config.json's {@code quantization}; and
 * NVFP4 as llm-compressor's compressed-tensors writes it (the same formulas as scripts/make_nvfp4_fixture.py's ct layout),
 * the head and embedding bf16.
 */
public final class QuantizedTestFiles {
    private static final Pattern LINEAR = Pattern.compile("(model\\.layers\\.\\d+\\.(self_attn|mlp)\\.\\w+_proj|lm_head)\\.weight");

    private QuantizedTestFiles() {
    }

    private static final float[] E2M1 = {0f, 0.5f, 1f, 1.5f, 2f, 3f, 4f, 6f};

    /**
     * The model in {@code modelDir} as a compressed-tensors {@code nvfp4-pack-quantized} checkpoint at {@code out} (written
     * once): each decoder linear layer's {@code weight_packed} (two E2M1 codes a byte, the even column low), {@code weight_scale}
     * (F8_E4M3, e4m3(amax_g / 6 x global) a group of 16) and {@code weight_global_scale} (448 x 6 / amax); codes the nearest
     * E2M1 of w / (e4m3 / global), ties to the even code.
     */
    public static synchronized Path nvfp4(Path modelDir, Path out) {
        if (Files.exists(out.resolve("model.safetensors"))) {
            return out;
        }
        try (Arena arena = Arena.ofConfined()) {
            ObjectNode config = copyFiles(modelDir, out);
            ObjectNode q = config.putObject("quantization_config").put("quant_method", "compressed-tensors").put("format", "nvfp4-pack-quantized")
                    .put("quantization_status", "compressed");
            ObjectNode w = q.putObject("config_groups").putObject("group_0");
            w.putArray("targets").add("Linear");
            w.putObject("weights").put("num_bits", 4).put("type", "float").put("strategy", "tensor_group").put("group_size", 16)
                    .put("symmetric", true).put("dynamic", false);
            w.putNull("input_activations");
            q.putArray("ignore").add("lm_head");
            q.putNull("kv_cache_scheme");
            new ObjectMapper().writerWithDefaultPrettyPrinter().writeValue(out.resolve("config.json").toFile(), config);
            SafetensorsWriter sw = new SafetensorsWriter();
            SafetensorsFile f = SafetensorsFile.open(modelDir.resolve("model.safetensors"), arena);
            for (TensorInfo t : f.tensors().values()) {
                if (LINEAR.matcher(t.name()).matches() && !t.name().startsWith("lm_head") && t.dtype() == DType.BF16) {
                    int rows = (int) t.shape()[0], cols = (int) t.shape()[1];
                    var src = f.bytes(t);
                    float amax = 0;
                    for (long i = 0; i < (long) rows * cols; i++) {
                        amax = Math.max(amax, Math.abs(Bf16.toFloat(src.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i))));
                    }
                    float global = 448f * 6f / amax;
                    byte[] packed = new byte[rows * cols / 2], scales = new byte[rows * cols / 16];
                    for (int i = 0; i < rows; i++) {
                        for (int g = 0; g < cols / 16; g++) {
                            float gmax = 0;
                            for (int j = g * 16; j < g * 16 + 16; j++) {
                                gmax = Math.max(gmax, Math.abs(Bf16.toFloat(src.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, (long) i * cols + j))));
                            }
                            byte sc = Fp8.encode(gmax / 6f * global);
                            scales[i * (cols / 16) + g] = sc;
                            float step = Fp8.decode(sc) / global;
                            for (int j = g * 16; j < g * 16 + 16; j++) {
                                float v = Bf16.toFloat(src.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, (long) i * cols + j));
                                int code = e2m1(step == 0 ? 0 : v / step);
                                packed[(i * cols + j) / 2] |= (byte) (j % 2 == 0 ? code : code << 4);
                            }
                        }
                    }
                    String base = t.name().substring(0, t.name().length() - "weight".length());
                    sw.put(base + "weight_packed", "U8", new long[]{rows, cols / 2}, packed);
                    sw.put(base + "weight_scale", "F8_E4M3", new long[]{rows, cols / 16}, scales);
                    sw.put(base + "weight_global_scale", "F32", new long[]{1},
                            java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putFloat(global).array());
                } else {
                    sw.put(t.name(), t.dtype().safetensorsName, t.shape(), f.bytes(t).toArray(ValueLayout.JAVA_BYTE));
                }
            }
            sw.write(out.resolve("model.safetensors"));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The nearest E2M1 code of y (ties to the even code; beyond 6 saturated; the sign bit 8). */
    private static int e2m1(float y) {
        float a = Math.min(Math.abs(y), 6f);
        int i = 1;
        while (i < 7 && E2M1[i] < a) {
            i++;
        }
        float lo = E2M1[i - 1], hi = E2M1[i];
        boolean up = a - lo > hi - a || (a - lo == hi - a && i % 2 == 0);
        int code = up ? i : i - 1;
        return code | (y < 0 && code != 0 ? 8 : 0);
    }

    /** The model's files other than its weights copied to out; its config.json, to be amended and written. */
    private static ObjectNode copyFiles(Path modelDir, Path out) throws IOException {
        Files.createDirectories(out);
        try (var files = Files.list(modelDir)) {
            for (Path f : files.filter(p -> !p.getFileName().toString().endsWith(".safetensors") && Files.isRegularFile(p)).toList()) {
                Files.copy(f, out.resolve(f.getFileName()), StandardCopyOption.REPLACE_EXISTING);
            }
        }
        return (ObjectNode) new ObjectMapper().readTree(modelDir.resolve("config.json").toFile());
    }

    /** The model in {@code modelDir} as an MLX affine checkpoint of {@code bits} bits in groups of {@code group}, at {@code out} (written once). */
    public static synchronized Path mlxAffine(Path modelDir, int bits, int group, Path out) {
        if (Files.exists(out.resolve("model.safetensors"))) {
            return out;
        }
        try (Arena arena = Arena.ofConfined()) {
            ObjectMapper json = new ObjectMapper();
            ObjectNode config = copyFiles(modelDir, out);
            config.putObject("quantization").put("group_size", group).put("bits", bits);
            config.set("quantization_config", config.get("quantization").deepCopy());
            json.writerWithDefaultPrettyPrinter().writeValue(out.resolve("config.json").toFile(), config);
            SafetensorsWriter w = new SafetensorsWriter();
            SafetensorsFile f = SafetensorsFile.open(modelDir.resolve("model.safetensors"), arena);
            for (TensorInfo t : f.tensors().values()) {
                if (LINEAR.matcher(t.name()).matches() && t.dtype() == DType.BF16) {
                    MlxMatrix q = AffineQuantizer.quantize(new Bf16Matrix(new Tensor(t.name(), DType.BF16, t.shape(), f.bytes(t))), bits, group, arena);
                    for (Tensor part : q.parts()) {
                        w.put(part.name(), part.dtype().safetensorsName, part.shape(), part.data().toArray(ValueLayout.JAVA_BYTE));
                    }
                } else {
                    w.put(t.name(), t.dtype().safetensorsName, t.shape(), f.bytes(t).toArray(ValueLayout.JAVA_BYTE));
                }
            }
            w.write(out.resolve("model.safetensors"));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

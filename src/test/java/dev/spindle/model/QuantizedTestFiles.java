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
 * Quantized checkpoints of a bf16 model written at test time (no fixture to commit): MLX affine as mlx-lm saves it, its
 * linear layers and head packed by {@link AffineQuantizer} (bit for bit as scripts/make_mlx_fixture.py packs them), the
 * embedding and norms bf16, config.json's {@code quantization}; the model's tokenizer, template and generation files beside.
 */
public final class QuantizedTestFiles {
    private static final Pattern LINEAR = Pattern.compile("(model\\.layers\\.\\d+\\.(self_attn|mlp)\\.\\w+_proj|lm_head)\\.weight");

    private QuantizedTestFiles() {
    }

    /** The model in {@code modelDir} as an MLX affine checkpoint of {@code bits} bits in groups of {@code group}, at {@code out} (written once). */
    public static synchronized Path mlxAffine(Path modelDir, int bits, int group, Path out) {
        if (Files.exists(out.resolve("model.safetensors"))) {
            return out;
        }
        try (Arena arena = Arena.ofConfined()) {
            Files.createDirectories(out);
            try (var files = Files.list(modelDir)) {
                for (Path f : files.filter(p -> !p.getFileName().toString().endsWith(".safetensors") && Files.isRegularFile(p)).toList()) {
                    Files.copy(f, out.resolve(f.getFileName()), StandardCopyOption.REPLACE_EXISTING);
                }
            }
            ObjectMapper json = new ObjectMapper();
            ObjectNode config = (ObjectNode) json.readTree(modelDir.resolve("config.json").toFile());
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

package dev.spindle.model;

import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;

/** Opens a Hugging Face model directory: config.json, then its safetensors or dummy weights. */
public final class ModelLoader {
    private ModelLoader() {
    }

    public static LoadedModel load(Path dir, LoadFormat format, LoadListener listener) {
        return load(dir, format, listener, HostReads.AT_LOAD);
    }

    /** As {@link #load(Path, LoadFormat, LoadListener)}, the mapped tensors read into memory when {@code reads} says. */
    public static LoadedModel load(Path dir, LoadFormat format, LoadListener listener, HostReads reads) {
        return load(dir, format, listener, reads, Quantization.NONE);
    }

    /** As {@link #load(Path, LoadFormat, LoadListener, HostReads)}, the linear layers quantized at load as {@code quantization} says. */
    public static LoadedModel load(Path dir, LoadFormat format, LoadListener listener, HostReads reads, Quantization quantization) {
        if (Files.isRegularFile(dir) && dir.getFileName().toString().endsWith(".gguf")) {
            return loadGguf(dir, format, listener, quantization);
        }
        if (!Files.isDirectory(dir)) {
            throw new ModelLoadException(dir + ": not a directory (expected a Hugging Face model directory with config.json, or a .gguf file)");
        }
        ModelConfig config = ConfigParser.read(dir.resolve("config.json"));
        Arena arena = Arena.ofShared();
        try {
            ModelWeights weights = switch (format) {
                case SAFETENSORS -> WeightBinder.bind(config, CheckpointQuantization.read(dir.resolve("config.json")), mlx(dir.resolve("config.json")),
                        Checkpoint.open(dir, arena), arena, listener, reads);
                case DUMMY -> DummyWeights.create(config, 0x5EED, arena, listener);
            };
            return new LoadedModel(dir, config, Fp8Quantizer.apply(weights, quantization, arena), arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** config.json's MLX quantization, or null. */
    private static MlxCheckpoints.Plan mlx(Path configJson) {
        try {
            return MlxCheckpoints.parse(new com.fasterxml.jackson.databind.ObjectMapper().readTree(configJson.toFile()));
        } catch (java.io.IOException e) {
            throw new ModelLoadException(configJson + ": not valid JSON: " + e.getMessage(), e);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(configJson + ": " + e.getMessage().replaceFirst("^config: ", ""), e);
        }
    }

    /** A GGUF file (llama architecture): its metadata as the config, its tensors as the weights ({@link dev.spindle.model.gguf.GgufModel}). */
    private static LoadedModel loadGguf(Path file, LoadFormat format, LoadListener listener, Quantization quantization) {
        if (format != LoadFormat.SAFETENSORS) {
            throw new ModelLoadException(file + ": --load-format " + format.name().toLowerCase() + " with a GGUF file (its weights are the file's)");
        }
        if (quantization != Quantization.NONE) {
            throw new ModelLoadException(file + ": --quantization " + quantization.label + " applies to a bf16 release; a GGUF file's weights are served as"
                    + " the file stores them");
        }
        Arena arena = Arena.ofShared();
        try {
            dev.spindle.model.gguf.GgufFile f = dev.spindle.model.gguf.GgufFile.open(file, arena);
            ModelConfig config = dev.spindle.model.gguf.GgufModel.config(f);
            return new LoadedModel(file, config, dev.spindle.model.gguf.GgufModel.weights(f, config, arena, listener), arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }
}

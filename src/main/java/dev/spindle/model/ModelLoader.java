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
        if (!Files.isDirectory(dir)) {
            throw new ModelLoadException(dir + ": not a directory (expected a Hugging Face model directory with config.json)");
        }
        ModelConfig config = ConfigParser.read(dir.resolve("config.json"));
        Arena arena = Arena.ofShared();
        try {
            ModelWeights weights = switch (format) {
                case SAFETENSORS -> WeightBinder.bind(config, CheckpointQuantization.read(dir.resolve("config.json")), Checkpoint.open(dir, arena), arena,
                        listener, reads);
                case DUMMY -> DummyWeights.create(config, 0x5EED, arena, listener);
            };
            return new LoadedModel(dir, config, Fp8Quantizer.apply(weights, quantization, arena), arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }
}

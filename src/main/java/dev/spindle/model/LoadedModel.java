package dev.spindle.model;

import java.lang.foreign.Arena;
import java.nio.file.Path;

/** A config and its bound weights; closing it unmaps the files and frees converted memory. */
public final class LoadedModel implements AutoCloseable {
    private final Path dir;
    private final ModelConfig config;
    private final ModelWeights weights;
    private final Arena arena;

    LoadedModel(Path dir, ModelConfig config, ModelWeights weights, Arena arena) {
        this.dir = dir;
        this.config = config;
        this.weights = weights;
        this.arena = arena;
    }

    public Path dir() {
        return dir;
    }

    public ModelConfig config() {
        return config;
    }

    public ModelWeights weights() {
        return weights;
    }

    @Override
    public void close() {
        arena.close();
    }
}

package dev.spindle.model;

import java.util.Map;
import java.util.Optional;

/**
 * The model families Spindle runs, and the literal table from the names a
 * config.json uses ({@code architectures[0]} and {@code model_type}) to them.
 */
public enum Family {
    /** Stock llama: L layers run once. Nanbeige4.3-33B and Nanbeige4.1-3B. */
    LLAMA,
    /** Nanbeige's looped llama: the L layers run num_loops times, one KV slot per executed layer. Nanbeige4.2-3B. */
    NANBEIGE_LOOPED;

    private static final Map<String, Family> BY_ARCHITECTURE = Map.of(
            "LlamaForCausalLM", LLAMA,
            "NanbeigeForCausalLM", NANBEIGE_LOOPED);
    private static final Map<String, Family> BY_MODEL_TYPE = Map.of(
            "llama", LLAMA,
            "nanbeige", NANBEIGE_LOOPED);

    public static Optional<Family> byArchitecture(String name) {
        return Optional.ofNullable(BY_ARCHITECTURE.get(name));
    }

    public static Optional<Family> byModelType(String name) {
        return Optional.ofNullable(BY_MODEL_TYPE.get(name));
    }

    public static String supportedNames() {
        return "architectures " + BY_ARCHITECTURE.keySet().stream().sorted().toList()
                + " / model_type " + BY_MODEL_TYPE.keySet().stream().sorted().toList();
    }
}

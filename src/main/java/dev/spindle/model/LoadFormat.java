package dev.spindle.model;

/** Where weights come from: the directory's safetensors, or seeded random values of the config's shapes. */
public enum LoadFormat {
    SAFETENSORS,
    DUMMY;

    /** From a flag or config value: safetensors (or auto), dummy. */
    public static LoadFormat parse(String value) {
        return switch (value.toLowerCase(java.util.Locale.ROOT)) {
            case "safetensors", "auto" -> SAFETENSORS;
            case "dummy" -> DUMMY;
            default -> throw new IllegalArgumentException("load format must be safetensors or dummy, not '" + value + "'");
        };
    }
}

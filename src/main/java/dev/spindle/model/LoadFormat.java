package dev.spindle.model;

/** Where weights come from: the directory's safetensors, or seeded random values of the config's shapes. */
public enum LoadFormat {
    SAFETENSORS,
    DUMMY
}

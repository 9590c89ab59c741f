package dev.spindle.model;

import java.util.Optional;

/**
 * The safetensors element types Spindle reads. Weights are served in bf16 (f16 and f32 files converted at load) or, as a
 * quantized checkpoint stores them or {@code --quantization fp8} makes them, in fp8 E4M3 with fp32 scales.
 */
public enum DType {
    BF16("BF16", 2),
    F16("F16", 2),
    F32("F32", 4),
    F8_E4M3("F8_E4M3", 1),
    /** 32-bit words of packed codes (an MLX-quantized weight: {@link MlxMatrix}, {@link Nvfp4Matrix}). */
    U32("U32", 4),
    /** Bytes of packed codes or of fp8 scales (an NVFP4 weight: {@link Nvfp4Matrix}). */
    U8("U8", 1),
    /** 16-bit integers: an EXL3 weight's trellis or packed sign bits ({@link Exl3Matrix}). */
    I16("I16", 2),
    /** 32-bit integers: an EXL3 layer's codebook marker ({@link Exl3Codebook}). */
    I32("I32", 4),
    /** Raw bytes of a block format (a GGUF tensor's ggml blocks: {@link GgmlMatrix}); no safetensors file names it. */
    BLOCKS("(ggml blocks)", 1);

    public final String safetensorsName;
    public final int bytes;

    DType(String safetensorsName, int bytes) {
        this.safetensorsName = safetensorsName;
        this.bytes = bytes;
    }

    public static Optional<DType> fromSafetensors(String name) {
        for (DType t : values()) {
            if (t.safetensorsName.equals(name)) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }
}

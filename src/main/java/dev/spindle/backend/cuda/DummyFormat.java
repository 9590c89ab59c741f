package dev.spindle.backend.cuda;

import dev.spindle.model.Quantization;

/**
 * The format of generated linear layers (--load-format dummy): bf16, quantized on the device as {@link Quantization} says, or
 * EXL3 of {@code exl3Bits} bits a weight with random trellises and sign vectors (the bench's stand-in for an EXL3 checkpoint
 * of the shape: the kernels' cost does not depend on the codes).
 */
public record DummyFormat(Quantization quantization, int exl3Bits) {
    public static final DummyFormat BF16 = new DummyFormat(Quantization.NONE, 0);

    public DummyFormat {
        if (exl3Bits < 0 || exl3Bits > 8 || (exl3Bits > 0 && quantization != Quantization.NONE)) {
            throw new IllegalArgumentException("dummy weights: EXL3 takes 1 to 8 bits a weight and no --quantization, got " + exl3Bits + " bits with "
                    + quantization.label);
        }
    }

    public static DummyFormat of(Quantization q) {
        return new DummyFormat(q, 0);
    }

    /** EXL3 of {@code bits} bits a weight (mul1's codebook, exllamav3's default). */
    public static DummyFormat exl3(int bits) {
        if (bits < 1) {
            throw new IllegalArgumentException("dummy EXL3 weights take 1 to 8 bits a weight, got " + bits);
        }
        return new DummyFormat(Quantization.NONE, bits);
    }

    /** As the start log and the bench name it. */
    public String label() {
        return exl3Bits > 0 ? "exl3-" + exl3Bits : quantization.label;
    }
}

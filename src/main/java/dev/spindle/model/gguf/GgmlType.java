package dev.spindle.model.gguf;

import java.util.Arrays;
import java.util.Optional;

/**
 * The ggml tensor types a GGUF file names by number, with their block shapes (elements and bytes a block), for the
 * types Spindle reads; any other type in a file is refused with the tensor and the type named.
 */
public enum GgmlType {
    F32(0, 1, 4),
    F16(1, 1, 2),
    Q4_0(2, 32, 18),
    Q4_1(3, 32, 20),
    Q5_0(6, 32, 22),
    Q5_1(7, 32, 24),
    Q8_0(8, 32, 34),
    Q2_K(10, 256, 84),
    Q3_K(11, 256, 110),
    Q4_K(12, 256, 144),
    Q5_K(13, 256, 176),
    Q6_K(14, 256, 210),
    IQ4_NL(20, 32, 18),
    IQ4_XS(23, 256, 136),
    BF16(30, 1, 2);

    /** The type's number in a GGUF file. */
    public final int id;
    /** Elements a block holds and the block's bytes. */
    public final int blockElements, blockBytes;

    GgmlType(int id, int blockElements, int blockBytes) {
        this.id = id;
        this.blockElements = blockElements;
        this.blockBytes = blockBytes;
    }

    /** The type numbered {@code id}, if Spindle reads it. */
    public static Optional<GgmlType> of(int id) {
        return Arrays.stream(values()).filter(t -> t.id == id).findFirst();
    }

    /** Bytes of a row of {@code elements} elements (a whole number of blocks). */
    public long rowBytes(long elements) {
        if (elements % blockElements != 0) {
            throw new IllegalArgumentException(name() + " stores rows in blocks of " + blockElements + " elements; a row of " + elements + " is not");
        }
        return elements / blockElements * blockBytes;
    }

    /** Whether the type is a block quantization (not a plain float type). */
    public boolean quantized() {
        return blockElements > 1;
    }

    /** ggml's name of the type, as llama.cpp prints it (q4_K, bf16, ...). */
    public String ggmlName() {
        String n = name();
        return n.endsWith("_K") ? n.substring(0, n.length() - 2).toLowerCase() + "_K" : n.toLowerCase();
    }
}

package dev.spindle.model;

/**
 * The procedural codebooks of EXL3 (exllamav3's trellis-coded weights): each maps a 16-bit trellis state to one fp16 value,
 * computed in 32-bit integer arithmetic (wrapping) and fp16, as exllamav3's dequantizers define them:
 * <ul>
 *   <li>{@code 3inst}: {@code x = x * 89226354 + 64248484}, then {@code x = (x & 0x8fff8fff) ^ 0x3b603b60} and the two fp16
 *       halves of x added in fp16 (each half lies in [2^-3, 1) in magnitude, so the sum is exact in fp32 and rounded once);</li>
 *   <li>{@code mcg}: {@code x = x * 0xCBAC1FED}, then the same;</li>
 *   <li>{@code mul1} (exllamav3's default): {@code x = x * 0x83DCD12D}, s = the sum of x's four bytes, h = the fp16 whose bits
 *       are {@code 0x6400 + s} (1024 + s), and the value {@code fp16(h * fp16(0x1eee) + fp16(0xc931))} with one rounding (a
 *       fused multiply-add; the exact result fits a float, so a float fma then one rounding to fp16 gives it).</li>
 * </ul>
 * A checkpoint names its codebook per layer by the presence of a {@code .mcg} or {@code .mul1} tensor (none: 3inst).
 */
public enum Exl3Codebook {
    THREE_INST("3inst", 0),
    MCG("mcg", 0xCBAC1FED),
    MUL1("mul1", 0x83DCD12D);

    /** The name exllamav3's converter and config.json use. */
    public final String label;
    /** The multiplier its marker tensor holds (mcg, mul1), 0 for 3inst. */
    public final int multiplier;
    private volatile float[] table;

    Exl3Codebook(String label, int multiplier) {
        this.label = label;
        this.multiplier = multiplier;
    }

    /** The fp16 bits of state {@code code}'s value (its low 16 bits). */
    public short decodeHalf(int code) {
        int x = code & 0xFFFF;
        return switch (this) {
            case THREE_INST -> lop3Sum(x * 89226354 + 64248484);
            case MCG -> lop3Sum(x * 0xCBAC1FED);
            case MUL1 -> {
                int y = x * 0x83DCD12D;
                int s = (y & 0xFF) + ((y >>> 8) & 0xFF) + ((y >>> 16) & 0xFF) + (y >>> 24);
                float h = Float.float16ToFloat((short) (0x6400 + s));
                yield Float.floatToFloat16(Math.fma(h, K_INV, K_BIAS));
            }
        };
    }

    private static final float K_INV = Float.float16ToFloat((short) 0x1eee);
    private static final float K_BIAS = Float.float16ToFloat((short) 0xc931);

    private static short lop3Sum(int x) {
        x = (x & 0x8fff8fff) ^ 0x3b603b60;
        return Float.floatToFloat16(Float.float16ToFloat((short) x) + Float.float16ToFloat((short) (x >>> 16)));
    }

    /** Every state's value as a float (the fp16 values, exactly), built once. */
    public float[] table() {
        float[] t = table;
        if (t == null) {
            t = new float[1 << 16];
            for (int c = 0; c < t.length; c++) {
                t[c] = Float.float16ToFloat(decodeHalf(c));
            }
            table = t;
        }
        return t;
    }

    /** The codebook of this label, or null. */
    public static Exl3Codebook of(String label) {
        for (Exl3Codebook c : values()) {
            if (c.label.equals(label)) {
                return c;
            }
        }
        return null;
    }
}

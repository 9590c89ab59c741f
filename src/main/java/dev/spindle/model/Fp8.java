package dev.spindle.model;

/**
 * FP8 E4M3 ("e4m3fn", as HF, vLLM and NVIDIA's tensor cores read it): a sign, 4 exponent bits (bias 7) and 3 mantissa
 * bits; subnormals below 2^-6 (steps of 2^-9); no infinities; 0x7F / 0xFF are NaN; the largest finite value is 448.
 * Every E4M3 value is exact in bf16 and in fp32.
 */
public final class Fp8 {
    /** The largest finite value. */
    public static final float MAX = 448f;
    private static final float[] DECODED = new float[256];

    static {
        for (int b = 0; b < 256; b++) {
            DECODED[b] = decodeBits(b);
        }
    }

    private Fp8() {
    }

    private static float decodeBits(int b) {
        int e = (b >> 3) & 0xF, m = b & 7;
        float sign = (b & 0x80) != 0 ? -1f : 1f;
        if (e == 0xF && m == 7) {
            return Float.NaN;
        }
        return sign * (e == 0 ? m * 0x1p-9f : (8 + m) * Math.scalb(1f, e - 10));
    }

    /** The value of an E4M3 byte. */
    public static float decode(byte b) {
        return DECODED[b & 0xFF];
    }

    /** The 256 values, by byte (for kernels that decode through a table). */
    public static float[] table() {
        return DECODED.clone();
    }

    /**
     * The E4M3 byte nearest {@code f}, ties to the even code; beyond ±448 saturated to ±448 (the quantizers divide by a
     * scale that keeps every value within range, so this only clamps a rounding at the top); NaN to 0x7F.
     */
    public static byte encode(float f) {
        if (Float.isNaN(f)) {
            return 0x7F;
        }
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 24) & 0x80;
        float a = Math.abs(f);
        int code;
        if (a >= MAX) {
            code = 0x7E;
        } else if (a < 0x1p-6f) {
            code = (int) Math.rint(a * 512f); // subnormal steps of 2^-9; 8 is 2^-6, the smallest normal's code
        } else {
            int ab = bits & 0x7FFFFFFF;
            // round the fp32 mantissa to 3 bits, ties to even (a carry moves into the exponent)
            int r = (ab + 0x7FFFF + ((ab >> 20) & 1)) & ~0xFFFFF;
            int e = (r >>> 23) - 127 + 7;
            code = Math.min(0x7E, (e << 3) | ((r >>> 20) & 7));
        }
        return (byte) (sign | code);
    }
}

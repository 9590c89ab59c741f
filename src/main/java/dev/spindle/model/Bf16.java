package dev.spindle.model;

/** bfloat16 bit conversions: the top 16 bits of an IEEE fp32, rounded to nearest even. */
public final class Bf16 {
    private Bf16() {
    }

    /** The bf16 bits nearest to {@code f} (ties to even; NaN stays NaN). */
    public static short fromFloat(float f) {
        int i = Float.floatToRawIntBits(f);
        if ((i & 0x7fffffff) > 0x7f800000) {
            return (short) ((i >>> 16) | 0x40);
        }
        i += 0x7fff + ((i >>> 16) & 1);
        return (short) (i >>> 16);
    }

    public static float toFloat(short bits) {
        return Float.intBitsToFloat(bits << 16);
    }

    /** {@code f} rounded to the nearest bf16 value, as fp32. */
    public static float round(float f) {
        return toFloat(fromFloat(f));
    }

    /** IEEE half bits to fp32 (exact). */
    public static float halfToFloat(short h) {
        return Float.float16ToFloat(h);
    }
}

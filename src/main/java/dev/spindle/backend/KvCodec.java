package dev.spindle.backend;

import dev.spindle.model.Bf16;
import dev.spindle.model.Fp8;
import dev.spindle.step.KvDtype;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * One head vector of K or V in a {@link KvDtype}'s record, and back: the reference every backend's store and attention
 * kernels follow. Decoded values are exact in fp32 (an E4M3 or small integer times a bf16 scale), so every reader of a
 * record gets the same floats.
 */
public final class KvCodec {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private KvCodec() {
    }

    /** {@code x} rounded up in magnitude to a bf16 value (a scale that never clips the group it scales). */
    static float bf16Up(float x) {
        int b = Float.floatToRawIntBits(x);
        if ((b & 0xFFFF) != 0) {
            b = (b & 0xFFFF0000) + 0x10000;
        }
        return Float.intBitsToFloat(b);
    }

    /** Writes {@code src[off, off + hd)} (bf16-valued) as one record of {@code dtype} at {@code dst[at]}. */
    public static void encode(KvDtype dtype, float[] src, int off, int hd, MemorySegment dst, long at) {
        switch (dtype) {
            case BF16 -> {
                for (int i = 0; i < hd; i++) {
                    dst.set(BF16, at + 2L * i, Bf16.fromFloat(src[off + i]));
                }
            }
            case FP8 -> {
                float s = scale(src, off, hd, Fp8.MAX);
                for (int i = 0; i < hd; i++) {
                    dst.set(ValueLayout.JAVA_BYTE, at + i, Fp8.encode(src[off + i] / s));
                }
                dst.set(BF16, at + hd, Bf16.fromFloat(s));
            }
            case Q8, Q4 -> {
                int g = dtype.groupSize(hd), top = dtype == KvDtype.Q8 ? 127 : 7;
                long scales = at + (dtype == KvDtype.Q8 ? hd : hd / 2);
                for (int g0 = 0; g0 < hd; g0 += g) {
                    float s = scale(src, off + g0, g, top);
                    dst.set(BF16, scales + 2L * (g0 / g), Bf16.fromFloat(s));
                    for (int i = g0; i < g0 + g; i++) {
                        int q = (int) Math.max(-top, Math.min(top, Math.rint(src[off + i] / s)));
                        if (dtype == KvDtype.Q8) {
                            dst.set(ValueLayout.JAVA_BYTE, at + i, (byte) q);
                        } else {
                            long b = at + i / 2;
                            byte old = dst.get(ValueLayout.JAVA_BYTE, b);
                            int nibble = q + 8;
                            dst.set(ValueLayout.JAVA_BYTE, b, (byte) ((i & 1) == 0 ? (old & 0xF0) | nibble : (old & 0x0F) | (nibble << 4)));
                        }
                    }
                }
            }
        }
    }

    /** Reads the record of {@code dtype} at {@code src[at]} into {@code out[0, hd)}. */
    public static void decode(KvDtype dtype, MemorySegment src, long at, int hd, float[] out) {
        switch (dtype) {
            case BF16 -> {
                for (int i = 0; i < hd; i++) {
                    out[i] = Bf16.toFloat(src.get(BF16, at + 2L * i));
                }
            }
            case FP8 -> {
                float s = Bf16.toFloat(src.get(BF16, at + hd));
                for (int i = 0; i < hd; i++) {
                    out[i] = Fp8.decode(src.get(ValueLayout.JAVA_BYTE, at + i)) * s;
                }
            }
            case Q8, Q4 -> {
                int g = dtype.groupSize(hd);
                long scales = at + (dtype == KvDtype.Q8 ? hd : hd / 2);
                for (int i = 0; i < hd; i++) {
                    float s = Bf16.toFloat(src.get(BF16, scales + 2L * (i / g)));
                    int q;
                    if (dtype == KvDtype.Q8) {
                        q = src.get(ValueLayout.JAVA_BYTE, at + i);
                    } else {
                        int b = src.get(ValueLayout.JAVA_BYTE, at + i / 2) & 0xFF;
                        q = ((i & 1) == 0 ? b & 0xF : b >>> 4) - 8;
                    }
                    out[i] = q * s;
                }
            }
        }
    }

    /** The group's largest magnitude over {@code top}, rounded up to bf16; 1 for a group of zeros. */
    private static float scale(float[] src, int off, int n, float top) {
        float amax = 0f;
        for (int i = 0; i < n; i++) {
            amax = Math.max(amax, Math.abs(src[off + i]));
        }
        return amax == 0f ? 1f : bf16Up(amax / top);
    }
}

package dev.spindle.model.gguf;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The CPU reference of ggml's block formats: each block decoded to fp32 exactly as ggml's reference dequantization
 * (ggml-quants.c) computes it, with the same products in the same order and no fused multiply-adds (checked bit for bit
 * against vectors made by gguf-py, llama.cpp's Python reader: src/test/resources/fixtures/ggml). Blocks are little-endian.
 */
public final class GgmlBlocks {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** IQ4_NL's and IQ4_XS's sixteen levels. */
    static final int[] IQ4_LEVELS = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

    private GgmlBlocks() {
    }

    /** {@code n} elements of type t (whole blocks) from byte {@code at} of src into out[off, off + n). */
    public static void decode(GgmlType t, MemorySegment src, long at, int n, float[] out, int off) {
        if (n % t.blockElements != 0) {
            throw new IllegalArgumentException(t + " decodes whole blocks of " + t.blockElements + " elements, not " + n);
        }
        switch (t) {
            case F32 -> {
                for (int i = 0; i < n; i++) {
                    out[off + i] = src.get(F32, at + 4L * i);
                }
            }
            case F16 -> {
                for (int i = 0; i < n; i++) {
                    out[off + i] = Float.float16ToFloat(src.get(I16, at + 2L * i));
                }
            }
            case BF16 -> {
                for (int i = 0; i < n; i++) {
                    out[off + i] = Float.intBitsToFloat(src.get(I16, at + 2L * i) << 16);
                }
            }
            default -> {
                for (int b = 0; b < n / t.blockElements; b++) {
                    block(t, src, at + (long) b * t.blockBytes, out, off + b * t.blockElements);
                }
            }
        }
    }

    private static int u8(MemorySegment s, long p) {
        return s.get(ValueLayout.JAVA_BYTE, p) & 0xFF;
    }

    private static float f16(MemorySegment s, long p) {
        return Float.float16ToFloat(s.get(I16, p));
    }

    /** One block of a quantized type at byte p into y[o, o + blockElements). */
    private static void block(GgmlType t, MemorySegment s, long p, float[] y, int o) {
        switch (t) {
            case Q4_0 -> {
                float d = f16(s, p);
                for (int j = 0; j < 16; j++) {
                    int q = u8(s, p + 2 + j);
                    y[o + j] = ((q & 0x0F) - 8) * d;
                    y[o + j + 16] = ((q >> 4) - 8) * d;
                }
            }
            case Q4_1 -> {
                float d = f16(s, p), m = f16(s, p + 2);
                for (int j = 0; j < 16; j++) {
                    int q = u8(s, p + 4 + j);
                    y[o + j] = (q & 0x0F) * d + m;
                    y[o + j + 16] = (q >> 4) * d + m;
                }
            }
            case Q5_0 -> {
                float d = f16(s, p);
                int qh = s.get(I32, p + 2);
                for (int j = 0; j < 16; j++) {
                    int q = u8(s, p + 6 + j);
                    int h0 = ((qh >>> j) << 4) & 0x10, h1 = (qh >>> (j + 12)) & 0x10;
                    y[o + j] = (((q & 0x0F) | h0) - 16) * d;
                    y[o + j + 16] = (((q >> 4) | h1) - 16) * d;
                }
            }
            case Q5_1 -> {
                float d = f16(s, p), m = f16(s, p + 2);
                int qh = s.get(I32, p + 4);
                for (int j = 0; j < 16; j++) {
                    int q = u8(s, p + 8 + j);
                    int h0 = ((qh >>> j) << 4) & 0x10, h1 = (qh >>> (j + 12)) & 0x10;
                    y[o + j] = ((q & 0x0F) | h0) * d + m;
                    y[o + j + 16] = ((q >> 4) | h1) * d + m;
                }
            }
            case Q8_0 -> {
                float d = f16(s, p);
                for (int j = 0; j < 32; j++) {
                    y[o + j] = s.get(ValueLayout.JAVA_BYTE, p + 2 + j) * d;
                }
            }
            case Q2_K -> q2k(s, p, y, o);
            case Q3_K -> q3k(s, p, y, o);
            case Q4_K, Q5_K -> q45k(t == GgmlType.Q5_K, s, p, y, o);
            case Q6_K -> q6k(s, p, y, o);
            case IQ4_NL -> {
                float d = f16(s, p);
                for (int j = 0; j < 16; j++) {
                    int q = u8(s, p + 2 + j);
                    y[o + j] = d * IQ4_LEVELS[q & 0xF];
                    y[o + j + 16] = d * IQ4_LEVELS[q >> 4];
                }
            }
            case IQ4_XS -> {
                float d = f16(s, p);
                int high = s.get(I16, p + 2) & 0xFFFF;
                for (int ib = 0; ib < 8; ib++) {
                    int ls = ((u8(s, p + 4 + ib / 2) >> (4 * (ib % 2))) & 0xF) | (((high >> (2 * ib)) & 3) << 4);
                    float dl = d * (ls - 32);
                    for (int j = 0; j < 16; j++) {
                        int q = u8(s, p + 8 + 16L * ib + j);
                        y[o + 32 * ib + j] = dl * IQ4_LEVELS[q & 0xF];
                        y[o + 32 * ib + j + 16] = dl * IQ4_LEVELS[q >> 4];
                    }
                }
            }
            default -> throw new IllegalArgumentException(t + " is not a block type");
        }
    }

    /** Q2_K: scales[16] (4-bit scale and min), qs[64] (2-bit), d, dmin. */
    private static void q2k(MemorySegment s, long p, float[] y, int o) {
        float d = f16(s, p + 80), min = f16(s, p + 82);
        int is = 0, at = o;
        for (int n = 0; n < 256; n += 128) {
            long q = p + 16 + n / 4;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    int sc = u8(s, p + is++);
                    float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) {
                        y[at++] = dl * ((u8(s, q + 16 * half + l) >> shift) & 3) - ml;
                    }
                }
            }
        }
    }

    /** Q3_K: hmask[32] (high bit), qs[64] (low 2 bits), scales[12] (sixteen 6-bit scales), d. */
    private static void q3k(MemorySegment s, long p, float[] y, int o) {
        float dAll = f16(s, p + 108);
        int a0 = s.get(I32, p + 96), a1 = s.get(I32, p + 100), tmp = s.get(I32, p + 104);
        final int m1 = 0x03030303, m2 = 0x0f0f0f0f;
        int[] aux = {(a0 & m2) | (((tmp) & m1) << 4), (a1 & m2) | (((tmp >>> 2) & m1) << 4),
                ((a0 >>> 4) & m2) | (((tmp >>> 4) & m1) << 4), ((a1 >>> 4) & m2) | (((tmp >>> 6) & m1) << 4)};
        int is = 0, at = o, mask = 1;
        for (int n = 0; n < 256; n += 128) {
            long q = p + 32 + n / 4;
            for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
                for (int half = 0; half < 2; half++) {
                    int sc = (byte) (aux[is / 4] >>> (8 * (is % 4)));
                    is++;
                    float dl = dAll * (sc - 32);
                    for (int l = 0; l < 16; l++) {
                        int low = (u8(s, q + 16 * half + l) >> shift) & 3;
                        boolean high = (u8(s, p + 16 * half + l) & mask) != 0;
                        y[at++] = dl * (low - (high ? 0 : 4));
                    }
                }
            }
        }
    }

    /** Q4_K / Q5_K: d, dmin, scales[12] (eight 6-bit scales and mins), [Q5_K: qh[32]], qs[128]. */
    private static void q45k(boolean five, MemorySegment s, long p, float[] y, int o) {
        float d = f16(s, p), min = f16(s, p + 2);
        long sc = p + 4, qh = p + 16, ql = p + (five ? 48 : 16);
        int at = o, u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, u1 <<= 2, u2 <<= 2) {
            float d1 = d * scale(s, sc, is), m1 = min * min(s, sc, is), d2 = d * scale(s, sc, is + 1), m2 = min * min(s, sc, is + 1);
            long q = ql + j / 2;
            for (int l = 0; l < 32; l++) {
                int v = u8(s, q + l) & 0xF;
                if (five) {
                    v += (u8(s, qh + l) & u1) != 0 ? 16 : 0;
                }
                y[at++] = d1 * v - m1;
            }
            for (int l = 0; l < 32; l++) {
                int v = u8(s, q + l) >> 4;
                if (five) {
                    v += (u8(s, qh + l) & u2) != 0 ? 16 : 0;
                }
                y[at++] = d2 * v - m2;
            }
        }
    }

    /** The j-th 6-bit scale of a K-quant's 12 scale bytes at q (ggml's get_scale_min_k4). */
    private static int scale(MemorySegment s, long q, int j) {
        return j < 4 ? u8(s, q + j) & 63 : (u8(s, q + j + 4) & 0xF) | ((u8(s, q + j - 4) >> 6) << 4);
    }

    /** The j-th 6-bit min. */
    private static int min(MemorySegment s, long q, int j) {
        return j < 4 ? u8(s, q + j + 4) & 63 : (u8(s, q + j + 4) >> 4) | ((u8(s, q + j) >> 6) << 4);
    }

    /** Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d. */
    private static void q6k(MemorySegment s, long p, float[] y, int o) {
        float d = f16(s, p + 208);
        for (int n = 0; n < 2; n++) {
            long ql = p + 64L * n, qh = p + 128 + 32L * n, sc = p + 192 + 8L * n;
            int base = o + 128 * n;
            for (int l = 0; l < 32; l++) {
                int is = l / 16, h = u8(s, qh + l), a = u8(s, ql + l), b = u8(s, ql + l + 32);
                int q1 = ((a & 0xF) | ((h & 3) << 4)) - 32, q2 = ((b & 0xF) | (((h >> 2) & 3) << 4)) - 32;
                int q3 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32, q4 = ((b >> 4) | (((h >> 6) & 3) << 4)) - 32;
                y[base + l] = d * s.get(ValueLayout.JAVA_BYTE, sc + is) * q1;
                y[base + l + 32] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 2) * q2;
                y[base + l + 64] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 4) * q3;
                y[base + l + 96] = d * s.get(ValueLayout.JAVA_BYTE, sc + is + 6) * q4;
            }
        }
    }
}

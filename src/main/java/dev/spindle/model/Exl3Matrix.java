package dev.spindle.model;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

/**
 * An EXL3 weight (exllamav3's trellis-coded format). The layer computes {@code y = x . W} with
 * {@code W = diag(su) . H . Ŵ . H . diag(sv)} (k = input rows, n = output columns): H is block-diagonal, one 128 x 128
 * Sylvester Hadamard matrix scaled by 1/sqrt(128) a block; {@code su} ({@code suh}, F16, padded inputs) and {@code sv}
 * ({@code svh}, F16, padded outputs) are sign-and-scale vectors; Ŵ is trellis-coded, one 16 x 16 tile a row of
 * {@code trellis} (I16, {@code (kPad/16, nPad/16, 16 K)}: 256 K bits, K = 1..8 bits a weight).
 *
 * <p>A tile's bit stream is MSB-first in 32-bit little-endian words (each stored as two int16, the low half first). Weight t
 * (0..255) of the tile reads the 16-bit state formed by the stream's bits {@code [(t+1)K - 16, (t+1)K)}, cyclically (the
 * trellis is tail-biting), and {@link Exl3Codebook} maps the state to an fp16 value. Weights run through the tile in the
 * tensor-core order: t = 8 lane + j with r0 = 2 (lane mod 4), c0 = lane / 4, and j = 0..7 at (row, column) (r0, c0),
 * (r0+1, c0), (r0+8, c0), (r0+9, c0), (r0, c0+8), (r0+1, c0+8), (r0+8, c0+8), (r0+9, c0+8), rows along k.
 *
 * <p>Dimensions are padded to multiples of 128 (the padded inputs are zeros, the padded outputs dropped). {@code rows} and
 * {@code cols} are the layer's output and input features; {@code first} the first padded output column of this matrix
 * (a column-parallel share starts at a multiple of 128).
 */
public record Exl3Matrix(Tensor trellis, Tensor su, Tensor sv, Exl3Codebook codebook, int rows, int cols, int first) implements Matrix {
    /** The Hadamard block. */
    public static final int BLOCK = 128;
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int[] ORDER = order();

    public Exl3Matrix {
        long[] s = trellis.shape();
        if (trellis.dtype() != DType.I16 || s.length != 3 || s[2] % 16 != 0 || s[2] / 16 < 1 || s[2] / 16 > 8) {
            throw new IllegalArgumentException(trellis.name() + ": an EXL3 trellis is I16 (in/16, out/16, 16 K) with K in 1..8, got "
                    + trellis.dtype() + " " + java.util.Arrays.toString(s));
        }
        if (s[0] * 16 != pad(cols) || first % BLOCK != 0 || first + pad(rows) > s[1] * 16) {
            throw new IllegalArgumentException(trellis.name() + ": trellis " + java.util.Arrays.toString(s) + " does not hold " + rows + " x "
                    + cols + " weights (padded to multiples of 128) from output " + first);
        }
        if (su.dtype() != DType.F16 || su.shape().length != 1 || su.shape()[0] != s[0] * 16
                || sv.dtype() != DType.F16 || sv.shape().length != 1 || sv.shape()[0] != s[1] * 16) {
            throw new IllegalArgumentException(trellis.name() + ": expected F16 sign vectors of " + s[0] * 16 + " and " + s[1] * 16
                    + " elements, got " + su.dtype() + " " + java.util.Arrays.toString(su.shape()) + " and " + sv.dtype() + " "
                    + java.util.Arrays.toString(sv.shape()));
        }
    }

    /** n rounded up to a multiple of 128. */
    public static int pad(int n) {
        return (n + BLOCK - 1) / BLOCK * BLOCK;
    }

    @Override
    public Tensor data() {
        return trellis;
    }

    /** Bits a weight (K). */
    public int bits() {
        return trellis.dim(2) / 16;
    }

    /** Input features padded (the tiles' k extent). */
    public int kPad() {
        return trellis.dim(0) * 16;
    }

    @Override
    public String format() {
        return format(bits(), codebook);
    }

    /** How a weight of {@code bits} bits in {@code codebook}'s trellis is named (the start log, /v1/models). */
    public static String format(int bits, Exl3Codebook codebook) {
        return "exl3 (" + bits + " bits a weight, " + codebook.label + " trellis)";
    }

    @Override
    public List<Tensor> parts() {
        return List.of(trellis, su, sv);
    }

    @Override
    public Exl3Matrix rows(int first, int count) {
        if (first < 0 || count < 0 || first + count > rows) {
            throw new IndexOutOfBoundsException("rows [" + first + ", " + (first + count) + ") of " + name() + "'s " + rows);
        }
        if (first % BLOCK != 0 || (count % BLOCK != 0 && first + count != rows)) {
            throw new IllegalArgumentException(name() + " is EXL3, whose outputs mix in blocks of 128: a share of rows [" + first + ", "
                    + (first + count) + ") must start at a multiple of 128 and end at one or at the last row");
        }
        return new Exl3Matrix(trellis, su, sv, codebook, count, cols, this.first + first);
    }

    /** su[i] (padded input i). */
    public float su(int i) {
        return Float.float16ToFloat(su.data().getAtIndex(F16, i));
    }

    /** sv[j] (padded output j of the whole layer, not of a share). */
    public float sv(int j) {
        return Float.float16ToFloat(sv.data().getAtIndex(F16, j));
    }

    /**
     * Tile (kt, nt) of Ŵ as fp16 values, row-major into {@code out[0, 256)}: out[16 r + c] is Ŵ[16 kt + r][16 nt + c]
     * (nt counts from the layer's first padded output column, not this share's). {@code words} is scratch of 8 K ints.
     */
    public void tile(int kt, int nt, float[] out, int[] words) {
        int k = bits(), n = 8 * k;
        MemorySegment seg = trellis.data();
        long base = ((long) kt * trellis.dim(1) + nt) * 32L * k;
        for (int i = 0; i < n; i++) {
            words[i] = seg.get(I32, base + 4L * i);
        }
        float[] table = codebook.table();
        // the state before weight 0 is the stream's last 16 bits (tail-biting); each weight shifts in its own K bits
        int state = bits(words, n, 256 * k - 16, 16);
        for (int t = 0; t < 256; t++) {
            state = ((state << k) | bits(words, n, t * k, k)) & 0xFFFF;
            out[ORDER[t]] = table[state];
        }
    }

    /** len (1..16) bits of the MSB-first stream from bit p, as an int. */
    private static int bits(int[] words, int n, int p, int len) {
        int w = p >>> 5, off = p & 31;
        long two = ((long) words[w] << 32) | (words[(w + 1) % n] & 0xFFFFFFFFL);
        return (int) (two >>> (64 - off - len)) & ((1 << len) - 1);
    }

    /** Trellis position t -> its row-major index in the 16 x 16 tile. */
    private static int[] order() {
        int[] p = new int[256];
        for (int lane = 0; lane < 32; lane++) {
            int r0 = (lane % 4) * 2, c0 = lane / 4;
            int[][] at = {{r0, c0}, {r0 + 1, c0}, {r0 + 8, c0}, {r0 + 9, c0}, {r0, c0 + 8}, {r0 + 1, c0 + 8}, {r0 + 8, c0 + 8}, {r0 + 9, c0 + 8}};
            for (int j = 0; j < 8; j++) {
                p[lane * 8 + j] = at[j][0] * 16 + at[j][1];
            }
        }
        return p;
    }
}

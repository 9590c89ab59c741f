package dev.spindle.backend.cuda;

import dev.spindle.model.Exl3Codebook;
import dev.spindle.model.Exl3Matrix;

import java.lang.foreign.MemorySegment;

/**
 * The EXL3 linear layer's kernels (exl3.cu): {@code exl3_had_in} (x' = H(su ⊙ x), the CPU reference's bits),
 * {@code exl3_gemv} (y' = Ŵᵀ x', decoding each trellis tile in the main loop; at most {@link #ROWS} rows a launch, each
 * row's sums in the same order whatever the others) and {@code exl3_had_out} (y = bf16(sv ⊙ H(y')), the CPU's bits over
 * y'). {@link Linear} runs them for a {@link DeviceMatrix.Exl3}, one projection of a stacked q|k|v or gate|up at a time
 * (each has its own su).
 */
public final class Exl3Kernels {
    /** Rows a gemv launch takes (the accumulators a lane holds). */
    public static final int ROWS = 8;
    /** Warps of a gemv CTA (exl3.cu's EXL3_WARPS): they split a 16-column group's k tiles; 32 x 4 = 8 rows x 16 columns sum their parts. */
    static final int WARPS = 4;
    private final CudaDriver cuda;
    private final MemorySegment hadIn, gemv, hadOut;

    Exl3Kernels(CudaDriver cuda, MemorySegment module) {
        this.cuda = cuda;
        hadIn = cuda.function(module, "exl3_had_in");
        gemv = cuda.function(module, "exl3_gemv");
        hadOut = cuda.function(module, "exl3_had_out");
    }

    /**
     * An EXL3 weight on the device: its trellis (the whole layer's, ntTotal 16-column tiles wide), su and sv (fp16), and its
     * layout ({@link Exl3Matrix}'s: rows and cols of the layer, first padded output, bits a weight, codebook).
     */
    public record Weights(long trellis, long su, long sv, String name, int rows, int cols, int first, int ntTotal, int bits, Exl3Codebook codebook) {
        /** The device copies of a host matrix's trellis, su and sv. */
        public static Weights of(long trellis, long su, long sv, Exl3Matrix m) {
            return new Weights(trellis, su, sv, m.name(), m.rows(), m.cols(), m.first(), m.trellis().dim(1), m.bits(), m.codebook());
        }

        int codebookIndex() {
            return switch (codebook) {
                case THREE_INST -> 0;
                case MCG -> 1;
                case MUL1 -> 2;
            };
        }

        /** Bytes a decode step reads: the trellis tiles of its own outputs and the sign vectors. */
        long decodeBytes() {
            int kPad = Exl3Matrix.pad(cols), nPad = Exl3Matrix.pad(rows);
            return (long) kPad * nPad * bits / 8 + 2L * kPad + 2L * nPad;
        }

        /** As {@link Exl3Matrix#format()}. */
        String format() {
            return Exl3Matrix.format(bits, codebook);
        }
    }

    /**
     * y (n, w.rows()) bf16 = x (n, k) bf16 (rows ldx apart) times the weight's columns [col, col + k); scratch: xh of
     * n x pad(k) floats, yh of n x pad(rows) floats.
     */
    public void linear(long x, int ldx, int n, Weights w, int col, int k, long y, long xh, long yh) {
        linear(x, ldx, n, w, col, k, y, w.rows(), xh, yh);
    }

    /** As {@link #linear(long, int, int, Weights, int, int, long, long, long)}, y's rows ldy elements apart. */
    public void linear(long x, int ldx, int n, Weights w, int col, int k, long y, int ldy, long xh, long yh) {
        if (col % Exl3Matrix.BLOCK != 0 || (k % Exl3Matrix.BLOCK != 0 && col + k != w.cols())) {
            throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + w.name() + ": EXL3 slices start at a multiple of 128");
        }
        int span = Exl3Matrix.pad(k), nSpan = Exl3Matrix.pad(w.rows()), ntTotal = w.ntTotal();
        cuda.launch(hadIn, n, span / 128, 128, x, ldx, k, w.su(), col, span, xh);
        for (int r0 = 0; r0 < n; r0 += ROWS) {
            int rows = Math.min(ROWS, n - r0);
            cuda.launch(gemv, nSpan / 16, 1, 32 * WARPS, xh + 4L * r0 * span, rows, span, w.trellis(), ntTotal, col / 16,
                    w.first() / 16, w.bits(), w.codebookIndex(), yh + 4L * r0 * nSpan, nSpan);
        }
        cuda.launch(hadOut, n, nSpan / 128, 128, yh, nSpan, w.sv(), w.first(), w.rows(), y, 0L, ldy);
    }
}

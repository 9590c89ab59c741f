package dev.spindle.backend.cpu;

import dev.spindle.model.Bf16;
import dev.spindle.model.Fp8;
import dev.spindle.model.Fp8Matrix;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The CPU reference of an fp8 weight's values ({@link Fp8Matrix}): each weight read as the bf16 value
 * {@code bf16(decode(q) * scale)} (fp32 product, one rounding), what the CUDA backend's fp8 kernels compute (fp8.cuh);
 * the layer over them is {@link ExpandedMatMul}'s.
 */
final class Fp8MatMul {
    private static final float[] DECODED = Fp8.table();

    private Fp8MatMul() {
    }

    /** Row j's columns [col, col + k) as the bf16 values they stand for, into row. */
    static void expand(MemorySegment q, Fp8Matrix w, int j, int col, int k, int bc, float[] row) {
        long base = (long) j * w.cols();
        for (int b0 = col; b0 < col + k; ) {
            int b1 = Math.min(col + k, (b0 / bc + 1) * bc);
            float s = w.scale(j, b0);
            for (int i = b0; i < b1; i++) {
                row[i - col] = Bf16.round(DECODED[q.get(ValueLayout.JAVA_BYTE, base + i) & 0xFF] * s);
            }
            b0 = b1;
        }
    }

    /** An fp8 weight's rows for {@link ExpandedMatMul}, checking the columns asked for. */
    static ExpandedMatMul.Rows rows(Fp8Matrix w) {
        MemorySegment q = w.data().data();
        return (j, col, k, out) -> {
            if (col < 0 || col + k > w.cols()) {
                throw new IllegalArgumentException("columns [" + col + ", " + (col + k) + ") of " + w.name() + "'s " + w.cols());
            }
            expand(q, w, j, col, k, w.blockCols(), out);
        };
    }
}

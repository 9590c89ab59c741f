package dev.spindle.backend.cuda;

import dev.spindle.model.DType;
import dev.spindle.model.Fp8Matrix;
import dev.spindle.model.Tensor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * The scales of fp8 matrices fused into one device matrix (q|k|v, gate|up), as {@link DeviceMatrix.Fp8} reads them:
 * {@code scales[i / blockRows][j / blockCols]} over the stacked rows. Where every part fills whole blocks of the same rows,
 * the parts' scale tensors one after another (the published layout, nothing added); else one row of block scales for
 * each row (blockRows 1: a per-tensor or per-block scale repeated, 4 bytes a row and column block). Host logic only, so
 * it is tested without a GPU.
 *
 * @param scales the tensors to copy, in order, to the device's scale array
 */
record Fp8Stack(int rows, int cols, int blockRows, int blockCols, List<Tensor> scales) {
    /** The stacking of {@code parts} (their columns and column blocks must agree); written-out rows live in {@code scratch}. */
    static Fp8Stack of(List<Fp8Matrix> parts, Arena scratch) {
        Fp8Matrix first = parts.getFirst();
        int cols = first.cols(), bc = first.blockCols(), sc = Math.ceilDiv(cols, bc), br = first.blockRows();
        for (Fp8Matrix p : parts) {
            if (p.cols() != cols || p.blockCols() != bc) {
                throw new CudaException(p.name() + " (" + p.cols() + " columns, scale blocks of " + p.blockCols() + ") and " + first.name() + " (" + cols
                        + ", " + bc + "): the CUDA backend fuses them into one matrix, so their columns and column blocks must agree");
            }
        }
        int rows = parts.stream().mapToInt(Fp8Matrix::rows).sum();
        if (parts.stream().allMatch(p -> p.blockRows() == br && p.rows() % br == 0)) {
            return new Fp8Stack(rows, cols, br, bc, parts.stream().map(Fp8Matrix::scales).toList());
        }
        MemorySegment perRow = scratch.allocate(4L * rows * sc, 64);
        long r = 0;
        for (Fp8Matrix p : parts) {
            for (int i = 0; i < p.rows(); i++, r++) {
                for (int j = 0; j < sc; j++) {
                    perRow.setAtIndex(ValueLayout.JAVA_FLOAT, r * sc + j, p.scale(i, j * bc));
                }
            }
        }
        return new Fp8Stack(rows, cols, 1, bc, List.of(new Tensor(first.name() + "_scale_rows", DType.F32, new long[]{rows, sc}, perRow)));
    }

    /** Bytes of the device's scale array. */
    long scaleBytes() {
        return scales.stream().mapToLong(t -> t.data().byteSize()).sum();
    }

    /** The scale the device reads for element (i, j) of the stacked matrix (the kernels' indexing over the copied tensors). */
    float scale(int i, int j) {
        long at = (long) (i / blockRows) * Math.ceilDiv(cols, blockCols) + j / blockCols;
        for (Tensor t : scales) {
            long n = t.data().byteSize() / 4;
            if (at < n) {
                return t.data().getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, at);
            }
            at -= n;
        }
        throw new IndexOutOfBoundsException("(" + i + ", " + j + ") of " + rows + " x " + cols);
    }
}

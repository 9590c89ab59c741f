package dev.spindle.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** TMA tensor maps (cuTensorMapEncodeTiled) of bf16 and byte (fp8) matrices, for the kernels that load their tiles with TMA. */
final class TensorMaps {
    private TensorMaps() {
    }

    /**
     * A tensor map of a row-major bf16 matrix of {@code rows} rows of {@code cols} elements, {@code rowStride} elements
     * apart, read in boxes of {@code boxRows} x {@code boxCols} with 128-byte swizzling (boxCols * 2 == 128) and zeros
     * outside the matrix, copied to device memory (128 bytes, 64-byte aligned) for kernels that read it from there;
     * returns its address (freed with {@link CudaDriver#free}).
     */
    static long bf16(CudaDriver cuda, long ptr, long rows, long cols, long rowStride, int boxRows, int boxCols) {
        return encode(cuda, 9 /* BFLOAT16 */, 2, 3 /* SWIZZLE_128B */, ptr, rows, cols, rowStride, boxRows, boxCols);
    }

    /**
     * A tensor map of a row-major matrix of bytes (fp8 codes): {@code rows} rows of {@code cols}, {@code rowStride} apart, read
     * in boxes of {@code boxRows} x {@code boxCols} (a multiple of 16) without swizzling, zeros outside; as {@link #bf16}.
     */
    static long u8(CudaDriver cuda, long ptr, long rows, long cols, long rowStride, int boxRows, int boxCols) {
        return encode(cuda, 0 /* UINT8 */, 1, 0 /* no swizzle */, ptr, rows, cols, rowStride, boxRows, boxCols);
    }

    /**
     * As {@link #u8} in the 64-byte swizzle (16-byte unit j of box row r at j ^ ((r / 2) % 4)): the fp8 mma.sync kernels'
     * weight boxes of 64 codes a row, whose column reads then fall in distinct banks.
     */
    static long u8Swizzled(CudaDriver cuda, long ptr, long rows, long cols, long rowStride, int boxRows, int boxCols) {
        return encode(cuda, 0 /* UINT8 */, 1, 2 /* SWIZZLE_64B */, ptr, rows, cols, rowStride, boxRows, boxCols);
    }

    private static long encode(CudaDriver cuda, int dtype, int elementBytes, int swizzle, long ptr, long rows, long cols, long rowStride,
                               int boxRows, int boxCols) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment map = a.allocate(128, 64);
            MemorySegment dims = a.allocateFrom(JAVA_LONG, cols, rows), strides = a.allocateFrom(JAVA_LONG, rowStride * elementBytes);
            MemorySegment box = a.allocateFrom(JAVA_INT, boxCols, boxRows), elems = a.allocateFrom(JAVA_INT, 1, 1);
            cuda.call("cuTensorMapEncodeTiled", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS,
                            ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT),
                    map, dtype, 2, ptr, dims, strides, box, elems, 0 /* no interleave */, swizzle,
                    3 /* L2 promotion 256B */, 0 /* out of bounds: zeros */);
            long d = cuda.alloc(128);
            cuda.copyToDevice(d, map);
            return d;
        }
    }
}

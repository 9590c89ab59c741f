package dev.spindle.backend.cuda;

import dev.spindle.backend.ffm.NativeLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * cuBLAS through FFM, on the driver's current context: the bf16 linear layer
 * {@code y = bf16(x @ W^T)} with fp32 accumulation (cublasGemmEx, CUDA_R_16BF in and out,
 * CUBLAS_COMPUTE_32F). Every status is checked and named.
 */
public final class Cublas {
    private static final int OP_N = 0, OP_T = 1, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1;
    private final MethodHandle gemmEx;
    private final MemorySegment handle;

    private Cublas(NativeLibrary lib) {
        MethodHandle create = lib.function("cublasCreate_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        gemmEx = lib.function("cublasGemmEx", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT,
                ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment h = a.allocate(ADDRESS);
            check("cublasCreate", (int) create.invokeExact(h));
            handle = h.get(ADDRESS, 0);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cublasCreate: " + t);
        }
    }

    /** cuBLAS on the current CUDA context, if the library can be found (libcublas.so.13 on the loader path). */
    public static Optional<Cublas> open() {
        if (CudaDriver.get().isEmpty()) {
            return Optional.empty();
        }
        return NativeLibrary.open(List.of("libcublas.so.13", "libcublas.so", "cublas64_13.dll")).map(Cublas::new);
    }

    private static void check(String call, int status) {
        if (status != 0) {
            throw new CudaException(call + " failed: cuBLAS status " + status);
        }
    }

    /**
     * y (n, nOut) = bf16(x (n, k) @ W^T), W (nOut, k): all row-major bf16 device arrays.
     * In cuBLAS's column-major terms: y^T (nOut x n) = op_T(W) (nOut x k) * x^T (k x n).
     */
    public void linear(long x, int n, int k, long w, int nOut, long y) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment alpha = a.allocateFrom(JAVA_FLOAT, 1f), beta = a.allocateFrom(JAVA_FLOAT, 0f);
            check("cublasGemmEx", (int) gemmEx.invokeExact(handle, OP_T, OP_N, nOut, n, k, alpha, MemorySegment.ofAddress(w), R_16BF, k,
                    MemorySegment.ofAddress(x), R_16BF, k, beta, MemorySegment.ofAddress(y), R_16BF, nOut, COMPUTE_32F, GEMM_DEFAULT));
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw new CudaException("cublasGemmEx: " + t);
        }
    }
}

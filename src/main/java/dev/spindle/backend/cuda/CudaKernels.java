package dev.spindle.backend.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * The kernels of the fatbin resource (src/main/cuda, one stem per kernel), loaded into
 * the current context, with their launch rules (see each .cu file's header comment).
 */
public final class CudaKernels {
    private final CudaDriver cuda;
    private final MemorySegment embed, rmsNorm, rope, swiglu, residualAdd;

    private CudaKernels(CudaDriver cuda, byte[] fatbin) {
        this.cuda = cuda;
        MemorySegment module = cuda.loadModule(fatbin);
        embed = cuda.function(module, "embed");
        rmsNorm = cuda.function(module, "rms_norm");
        rope = cuda.function(module, "rope");
        swiglu = cuda.function(module, "swiglu");
        residualAdd = cuda.function(module, "residual_add");
    }

    /** The kernels, if this build has them (nvcc was present) and a GPU is here. */
    public static Optional<CudaKernels> load() {
        Optional<CudaDriver> cuda = CudaDriver.get();
        if (cuda.isEmpty()) {
            return Optional.empty();
        }
        try (InputStream in = CudaKernels.class.getResourceAsStream("/cuda/spindle.fatbin")) {
            if (in == null) {
                return Optional.empty();
            }
            return Optional.of(new CudaKernels(cuda.get(), in.readAllBytes()));
        } catch (IOException e) {
            throw new CudaException("cannot read the fatbin resource: " + e.getMessage());
        }
    }

    public CudaDriver driver() {
        return cuda;
    }

    /** out (rows, hidden) = table[tokens]. */
    public void embed(long tokens, long table, long out, int rows, int hidden) {
        cuda.launch(embed, rows, 1, 256, tokens, table, out, rows, hidden);
    }

    /** out = rmsnorm(x) * w, per row of width. */
    public void rmsNorm(long x, long w, long out, int rows, int width, float eps) {
        cuda.launch(rmsNorm, rows, 1, 256, x, w, out, rows, width, eps);
    }

    /** x (rows, heads, headDim) rotated in place with cos/sin (rows, headDim/2), fp32. */
    public void rope(long x, long cos, long sin, int rows, int heads, int headDim) {
        cuda.launch(rope, rows, heads, headDim / 2, x, cos, sin, rows, heads, headDim);
    }

    /** gate = silu(gate) * up over n elements. */
    public void swiglu(long gate, long up, long n) {
        cuda.launch(swiglu, (int) Math.min(4096, (n + 255) / 256), 1, 256, gate, up, n);
    }

    /** x += y over n elements. */
    public void residualAdd(long x, long y, long n) {
        cuda.launch(residualAdd, (int) Math.min(4096, (n + 255) / 256), 1, 256, x, y, n);
    }
}

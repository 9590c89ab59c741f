package dev.spindle.backend.cuda;

import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelWeights;
import dev.spindle.model.Quantization;

import java.util.ArrayList;
import java.util.List;

/**
 * Opens the CUDA backend's forward pass for a model: on one GPU (kernels, cuBLASLt, the weights uploaded or generated,
 * the pass, then its choice of paired launches), or split over tensor-parallel ranks, each at its {@link Placement}.
 */
public final class CudaPasses {
    private CudaPasses() {
    }

    /**
     * Opens the CUDA backend for a model: kernels, cuBLASLt, weights on the device (uploaded
     * from {@code hostWeights}, or generated there when it is null: --load-format dummy), the pass.
     *
     * @throws CudaException saying why when there is no usable GPU, kernels or cuBLASLt here
     */
    public static CudaForwardPass open(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                       LoadListener listener) {
        return open(config, hostWeights, options, listener, 0);
    }

    /** As {@link #open(ModelConfig, dev.spindle.model.ModelWeights, CudaOptions, dev.spindle.model.LoadListener)}, on device {@code ordinal}. */
    public static CudaForwardPass open(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                       LoadListener listener, int ordinal) {
        return open(config, hostWeights, options, listener, ordinal, Quantization.NONE);
    }

    /**
     * As {@link #open(ModelConfig, ModelWeights, CudaOptions, LoadListener, int)}; generated weights (no host weights) have
     * their linear layers quantized on the device as {@code dummy} says (host weights come quantized by the loader).
     */
    public static CudaForwardPass open(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                       LoadListener listener, int ordinal, Quantization dummy) {
        return open(config, hostWeights, options, listener, ordinal, DummyFormat.of(dummy));
    }

    /** As {@link #open(ModelConfig, ModelWeights, CudaOptions, LoadListener, int, Quantization)}, generated weights in {@code dummy}'s format. */
    public static CudaForwardPass open(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                       LoadListener listener, int ordinal, DummyFormat dummy) {
        CudaKernels kernels = kernels(new Placement(ordinal, 0), "", options.kernels());
        CublasLt lt = cublasLt(kernels);
        CudaWeights w = hostWeights == null ? CudaWeights.dummy(kernels.driver(), kernels, config, 0x5EED, listener, true, dummy)
                : CudaWeights.upload(kernels.driver(), config, hostWeights, listener);
        CudaForwardPass pass;
        try {
            pass = new CudaForwardPass(config, kernels, lt, w, options);
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
        try {
            pass.choosePairing();
        } catch (RuntimeException e) {
            pass.close();
            throw e;
        }
        return pass;
    }

    /**
     * Opens the model split over {@code placements.size()} tensor-parallel ranks ({@link dev.spindle.backend.TensorParallelLayout}),
     * rank r at placements[r]: each rank's weights uploaded from {@code hostWeights} (or generated, without host weights), its
     * KV pool and buffers; returns rank 0, which leads the others (its {@link CudaForwardPass#execute} runs every rank; it computes the head)
     * and closes them with itself. Each rank's KV pool has as many blocks as rank 0's (the smallest, as rank 0 holds the head
     * too). One placement: {@link #open(ModelConfig, dev.spindle.model.ModelWeights, CudaOptions, dev.spindle.model.LoadListener, int)}.
     */
    public static CudaForwardPass openTensorParallel(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                                     LoadListener listener, List<Placement> placements) {
        return openTensorParallel(config, hostWeights, options, listener, placements, Quantization.NONE);
    }

    /** As {@link #openTensorParallel(ModelConfig, ModelWeights, CudaOptions, LoadListener, List)}, generated weights quantized as {@code dummy} says (one rank only). */
    public static CudaForwardPass openTensorParallel(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                                     LoadListener listener, List<Placement> placements, Quantization dummy) {
        return openTensorParallel(config, hostWeights, options, listener, placements, DummyFormat.of(dummy));
    }

    /** As {@link #openTensorParallel(ModelConfig, ModelWeights, CudaOptions, LoadListener, List, Quantization)}, generated weights in {@code dummy}'s format (one rank only unless bf16). */
    public static CudaForwardPass openTensorParallel(ModelConfig config, ModelWeights hostWeights, CudaOptions options,
                                                     LoadListener listener, List<Placement> placements, DummyFormat dummy) {
        int n = placements.size();
        TensorParallelLayout tp = TensorParallelLayout.of(config, n);
        if (n == 1) {
            return open(config, hostWeights, options, listener, placements.getFirst().ordinal(), dummy);
        }
        if (!dummy.equals(DummyFormat.BF16)) {
            throw new CudaException(dummy.label() + " weights with tensor parallelism: the CUDA backend splits only bf16 weights so far");
        }
        if (n > CudaKernels.MAX_RANKS) {
            throw new CudaException("tensor-parallel size " + n + ": the all-reduce adds at most " + CudaKernels.MAX_RANKS + " ranks");
        }
        ModelConfig shapes = tp.rankConfig(config);
        List<CudaForwardPass> others = new ArrayList<>();
        try {
            int blocks = options.maxKvBlocks() > 0 ? options.maxKvBlocks() : Integer.MAX_VALUE;
            for (int r = 1; r < n; r++) {
                CudaForwardPass p = openRank(config, shapes, tp, r, hostWeights, options, listener, placements.get(r));
                others.add(p);
                blocks = Math.min(blocks, p.kvCapacity().blocks());
            }
            CudaOptions leadOptions = new CudaOptions(options.blockSize(), options.maxStepRows(), options.kvMemoryFraction(), blocks, options.cudaGraphs(),
                    options.gemmCache(), options.reserveBytes(), options.extraKvBytesPerToken(), options.kvDtype(), options.kernels(),
                    options.memoryLimit());
            CudaForwardPass lead = openRank(config, shapes, tp, 0, hostWeights, leadOptions, listener, placements.getFirst());
            lead.leadTensorParallel(others);
            return lead;
        } catch (RuntimeException e) {
            for (CudaForwardPass p : others) {
                p.close();
            }
            throw e;
        }
    }

    private static CudaForwardPass openRank(ModelConfig config, ModelConfig shapes, TensorParallelLayout tp, int rank,
                                            ModelWeights hostWeights, CudaOptions options, LoadListener listener,
                                            Placement at) {
        CudaKernels kernels = kernels(at, "tensor-parallel rank " + rank + ": ", options.kernels());
        CublasLt lt = cublasLt(kernels);
        CublasLt partialLt = CublasLt.open(kernels, true).orElseThrow();
        boolean head = rank == 0;
        CudaWeights w = hostWeights == null ? CudaWeights.dummy(kernels.driver(), kernels, shapes, 0x5EED + 7919L * rank, listener, head)
                : CudaWeights.upload(kernels.driver(), config, hostWeights, listener, tp, rank, head);
        try {
            return new CudaForwardPass(config, shapes, kernels, lt, partialLt, w, options, head);
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /** The kernels at {@code at}, made current on this thread; {@code who} prefixes the refusal (a rank's, or none). */
    private static CudaKernels kernels(Placement at, String who, KernelSet set) {
        CudaKernels kernels = CudaKernels.load(at.ordinal(), at.lane(), set).orElseThrow(() -> new CudaException(who
                + "the CUDA backend is unavailable on device " + at.ordinal() + ": "
                + (at.ordinal() == 0 ? CudaKernels.unavailableReason(set) : "no such device, or no kernels in this build")));
        kernels.driver().makeCurrent();
        return kernels;
    }

    private static CublasLt cublasLt(CudaKernels kernels) {
        return CublasLt.open(kernels).orElseThrow(() -> new CudaException("the CUDA backend needs cuBLASLt (libcublasLt.so.13) on the library path"));
    }
}

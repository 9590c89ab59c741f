package dev.spindle.wiring;

import dev.spindle.backend.TensorParallelLayout;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.backend.cuda.CublasLt;
import dev.spindle.backend.cuda.CudaDriver;
import dev.spindle.backend.cuda.CudaException;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.CudaKernels;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.backend.cuda.KernelSet;
import dev.spindle.backend.cuda.CudaPasses;
import dev.spindle.backend.cuda.Placement;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.KvDtype;

import java.nio.file.Path;
import java.util.Locale;

/**
 * Chooses and opens the backend a model is served on: {@code cpu}, {@code cuda}, or
 * {@code auto} (CUDA when a GPU, the compiled kernels and cuBLASLt are here, else the CPU,
 * saying why). The description says what was chosen, for the startup log.
 */
public final class Backends {
    private Backends() {
    }

    /** The configured choice. */
    public enum Kind {
        AUTO, CPU, CUDA;

        public static Kind parse(String s) {
            try {
                return valueOf(s.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("backend: expected auto, cpu or cuda, got \"" + s + "\"");
            }
        }
    }

    /**
     * What a backend is sized by.
     *
     * @param threads          CPU backend threads
     * @param blockSize        tokens per KV block
     * @param kvCacheTokens    KV capacity in tokens; 0 on CUDA: sized from free device memory
     * @param maxStepRows      rows one forward step may hold (the engine's token budget)
     * @param kvMemoryFraction CUDA: share of the device memory left after weights that the KV pool takes
     * @param cudaGraphs       CUDA: replay decode steps as captured graphs
     * @param gemmCache        CUDA: the folder caching the pinned GEMM algorithms, or null for none
     * @param reserveBytes     CUDA: device memory left for a draft model opened next (its weights and buffers)
     * @param extraKvBytesPerToken CUDA: the draft model's KV bytes per token, reserved for as many tokens as this pool holds
     * @param tensorParallel   tensor-parallel ranks the model is split over ({@link TensorParallelLayout}); 1: none. The CPU
     *                         backend computes that many ranks' numerics; the CUDA backend runs one GPU and refuses more
     * @param quantization     the linear layers' weights quantized at load ({@link Quantization#NONE}: as the checkpoint stores them)
     * @param kvDtype          how the KV cache stores K and V ({@link KvDtype#BF16}: exact)
     * @param cudaKernels      CUDA: which kernels run ({@link KernelSet#FULL}, or only the portable ones)
     * @param gpuMemoryLimit   CUDA: device memory the process may use in all, as on a card of that size (0: the whole device)
     */
    public record Settings(int threads, int blockSize, int kvCacheTokens, int maxStepRows, double kvMemoryFraction, boolean cudaGraphs,
                           Path gemmCache, long reserveBytes, long extraKvBytesPerToken, int tensorParallel, Quantization quantization,
                           KvDtype kvDtype, KernelSet cudaKernels, long gpuMemoryLimit) {
        public Settings(int threads, int blockSize, int kvCacheTokens, int maxStepRows, double kvMemoryFraction, boolean cudaGraphs,
                        Path gemmCache) {
            this(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, 0, 0, 1, Quantization.NONE, KvDtype.BF16,
                    KernelSet.FULL, 0);
        }

        /** Without a GEMM algorithm cache. */
        public Settings(int threads, int blockSize, int kvCacheTokens, int maxStepRows, double kvMemoryFraction, boolean cudaGraphs) {
            this(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, null);
        }

        public Settings withReserve(long bytes, long kvBytesPerToken) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, bytes, kvBytesPerToken,
                    tensorParallel, quantization, kvDtype, cudaKernels, gpuMemoryLimit);
        }

        /** These settings over {@code ranks} tensor-parallel ranks. */
        public Settings withTensorParallel(int ranks) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, reserveBytes,
                    extraKvBytesPerToken, ranks, quantization, kvDtype, cudaKernels, gpuMemoryLimit);
        }

        /** These settings with the linear layers quantized at load as {@code q} says. */
        public Settings withQuantization(Quantization q) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, reserveBytes,
                    extraKvBytesPerToken, tensorParallel, q, kvDtype, cudaKernels, gpuMemoryLimit);
        }

        /** These settings with the KV cache stored as {@code d}. */
        public Settings withKvDtype(KvDtype d) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, reserveBytes,
                    extraKvBytesPerToken, tensorParallel, quantization, d, cudaKernels, gpuMemoryLimit);
        }

        /** These settings running the CUDA kernels of {@code set}. */
        public Settings withCudaKernels(KernelSet set) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, reserveBytes,
                    extraKvBytesPerToken, tensorParallel, quantization, kvDtype, set, gpuMemoryLimit);
        }

        /** These settings using at most {@code bytes} of device memory (0: the whole device). */
        public Settings withGpuMemoryLimit(long bytes) {
            return new Settings(threads, blockSize, kvCacheTokens, maxStepRows, kvMemoryFraction, cudaGraphs, gemmCache, reserveBytes,
                    extraKvBytesPerToken, tensorParallel, quantization, kvDtype, cudaKernels, bytes);
        }
    }

    /**
     * An opened backend; closing it closes the pass and the host copy of the weights. {@code weights}: the linear layers'
     * format as served (e.g. bf16, or fp8-e4m3 with its scales).
     */
    public record Opened(ForwardPass pass, ModelConfig config, String description, AutoCloseable hostModel, String weights) implements AutoCloseable {
        @Override
        public void close() {
            pass.close();
            try {
                if (hostModel != null) {
                    hostModel.close();
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** What a configured kind comes to here: CPU or CUDA, and why. */
    public record Choice(boolean cuda, String reason) {
    }

    /** The backend {@code kind} resolves to here ({@code auto}: CUDA when usable), and why. */
    public static Choice resolve(Kind kind) {
        if (kind != Kind.AUTO) {
            return new Choice(kind == Kind.CUDA, "configured");
        }
        String why = cudaUnavailableReason();
        return why == null ? new Choice(true, "auto: a CUDA device is present") : new Choice(false, "auto: " + why);
    }

    /** Why the CUDA backend cannot run here (no driver or GPU, no compiled kernels, no cuBLASLt), or null when it can. */
    public static String cudaUnavailableReason() {
        if (CudaKernels.load().isEmpty()) {
            return CudaKernels.unavailableReason();
        }
        if (!CublasLt.available()) {
            return "cuBLASLt (libcublasLt.so.13) is not on the library path";
        }
        return null;
    }

    public static Opened open(Path dir, LoadFormat format, Kind kind, Settings s, LoadListener listener) {
        Choice chosen = resolve(kind);
        if (s.tensorParallel() != 1) {
            // the split is checked against the model before anything else is read (at least 1, and which divisors it allows)
            TensorParallelLayout.of(ConfigParser.read(dir.resolve("config.json")), s.tensorParallel());
            int gpus = chosen.cuda() ? CudaDriver.deviceCount() : 0;
            if (chosen.cuda() && gpus < s.tensorParallel()) {
                throw new IllegalArgumentException("tensor-parallel-size " + s.tensorParallel() + " needs " + s.tensorParallel()
                        + " GPUs (one a rank, GPUs 0 to " + (s.tensorParallel() - 1) + "); this machine has " + gpus
                        + ". The CPU backend computes the split's numerics (--backend cpu)");
            }
        }
        if (chosen.cuda()) {
            if (s.kvDtype() != KvDtype.BF16 && s.kvDtype() != KvDtype.FP8) {
                throw new IllegalArgumentException("--kv-cache-dtype " + s.kvDtype().label + ": the CUDA backend's attention kernels read bf16 and fp8"
                        + " KV caches; q8 and q4 run on the CPU backend (--backend cpu)");
            }
            if (kind == Kind.CUDA) {
                String why = cudaUnavailableReason();
                if (why != null) {
                    throw new CudaException("backend cuda: " + why);
                }
            }
            return openCuda(dir, format, s, listener, chosen.reason());
        }
        LoadedModel m = ModelLoader.load(dir, format, listener, HostReads.AT_LOAD, s.quantization());
        try {
            int blocks = Math.max(1, s.kvCacheTokens() / s.blockSize());
            CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), blocks, s.blockSize(), s.threads(), KvSlots.PER_EXECUTED_LAYER,
                    s.tensorParallel(), s.kvDtype());
            TensorParallelLayout tp = cpu.tensorParallel();
            String ranks = tp.ranks() == 1 ? "" : String.format("; computing %d tensor-parallel ranks' numerics (a rank: %d query and %d KV heads,"
                    + " %d MLP columns; partials summed in fp32 in rank order)", tp.ranks(), tp.qHeads(), tp.kvHeads(), tp.intermediate());
            String weights = weightFormat(m);
            return new Opened(cpu, m.config(), String.format("the CPU backend (%s) with %d threads; weights %s; KV pool %d blocks of %d tokens, %s%s",
                    chosen.reason(), s.threads(), weights, blocks, s.blockSize(), s.kvDtype().label, ranks), m, weights);
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /** The linear layers' format as the start log names it (the first layer's; every layer has the same). */
    static String weightFormat(LoadedModel m) {
        return m.weights().layers().getFirst().q().format();
    }

    /** How the start log describes an opened CUDA backend: the device, the start's phases, the KV pool. */
    static String cudaDescription(String why, String device, long weightBytes, boolean generated, double uploadSeconds, double mapSeconds,
                                  double setupSeconds, int kvBlocks, int blockSize, long kvPoolBytes, boolean cudaGraphs) {
        return cudaDescription(why, device, weightBytes, generated, uploadSeconds, mapSeconds, setupSeconds, kvBlocks, blockSize, kvPoolBytes, cudaGraphs,
                KvDtype.BF16);
    }

    /** As above, naming the KV cache's dtype where it is not bf16. */
    static String cudaDescription(String why, String device, long weightBytes, boolean generated, double uploadSeconds, double mapSeconds,
                                  double setupSeconds, int kvBlocks, int blockSize, long kvPoolBytes, boolean cudaGraphs, KvDtype kv) {
        return String.format(Locale.ROOT, "the CUDA backend (%s) on %s: %.1f GB of weights %s in %.2f s (%.1f GB/s); checkpoint mapped and checked in %.2f s,"
                        + " setup (kernels, GEMM choices, tensor maps, KV pool) %.2f s; KV pool %d blocks of %d tokens (%,d tokens, %.1f GiB%s); CUDA graphs %s",
                why, device, weightBytes / 1e9, generated ? "generated" : "read and uploaded", uploadSeconds, weightBytes / 1e9 / Math.max(1e-9, uploadSeconds),
                mapSeconds, setupSeconds, kvBlocks, blockSize, (long) kvBlocks * blockSize, kvPoolBytes / (double) (1L << 30),
                kv == KvDtype.BF16 ? "" : ", " + kv.label, cudaGraphs ? "on" : "off");
    }

    /** The start line's tensor-parallel part: each rank's GPU and memory (nothing at one rank). */
    static String tensorParallelDescription(java.util.List<String> ranks) {
        if (ranks.isEmpty()) {
            return "";
        }
        return String.format(Locale.ROOT, "; tensor-parallel over %d ranks, all-reduce in fp32 in rank order over peer memory (the figures above"
                + " are rank 0's): %s", ranks.size(), String.join("; ", ranks));
    }

    private static Opened openCuda(Path dir, LoadFormat format, Settings s, LoadListener listener, String why) {
        // the options first: a setting the backend refuses is reported before any weight is read
        int maxBlocks = s.kvCacheTokens() > 0 ? Math.max(1, s.kvCacheTokens() / s.blockSize()) : 0;
        CudaOptions options = new CudaOptions(s.blockSize(), s.maxStepRows(), s.kvMemoryFraction(), maxBlocks,
                s.cudaGraphs(), s.gemmCache(), s.reserveBytes(), s.extraKvBytesPerToken()).withKvDtype(s.kvDtype()).withKernels(s.cudaKernels())
                .withMemoryLimit(s.gpuMemoryLimit());
        long t0 = System.nanoTime();
        // the upload reads the checkpoint as it copies it (from a cold page cache the disk's reads and the copies overlap)
        // (weights quantized at load are read by the quantizer, on the host, as the CPU backend's are)
        LoadedModel host = format == LoadFormat.DUMMY ? null : ModelLoader.load(dir, format, listener,
                s.quantization() == Quantization.NONE ? HostReads.AT_UPLOAD : HostReads.AT_LOAD, s.quantization());
        ModelConfig c = host != null ? host.config() : ConfigParser.read(dir.resolve("config.json"));
        double mapSeconds = (System.nanoTime() - t0) / 1e9;
        try {
            long t1 = System.nanoTime();
            CudaForwardPass gpu = CudaPasses.openTensorParallel(c, host == null ? null : host.weights(), options, listener,
                    Placement.oneGpuEach(s.tensorParallel()), s.quantization());
            // the start's phases, as bench's "load": the checkpoint mapped, validated and read in; the upload; the pass's setup
            // (kernels, cuBLASLt's GEMM choices or their cache, linear_rows checks and tensor maps, the KV pool)
            double setupSeconds = (System.nanoTime() - t1) / 1e9 - gpu.weights().seconds();
            String desc = cudaDescription(why, gpu.driver().deviceName(), gpu.weights().bytes(), host == null, gpu.weights().seconds(), mapSeconds,
                    setupSeconds, gpu.kvCapacity().blocks(), s.blockSize(), gpu.kvPoolBytes(), s.cudaGraphs(), s.kvDtype())
                    + tensorParallelDescription(gpu.tensorParallelMemory())
                    + (s.cudaKernels() == KernelSet.PORTABLE ? "; portable kernels only (sm_80 PTX compiled by the driver: no wgmma, tensor-memory"
                    + " copies or linear_rows)" : "");
            String weights = host != null ? weightFormat(host) : gpu.weights().format();
            if (host != null) {
                host.close(); // the weights live on the device now; unmap the files
            }
            return new Opened(gpu, c, desc, null, weights);
        } catch (RuntimeException e) {
            if (host != null) {
                host.close();
            }
            throw e;
        }
    }
}

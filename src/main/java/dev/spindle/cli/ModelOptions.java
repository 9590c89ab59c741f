package dev.spindle.cli;

import dev.spindle.backend.cuda.GemmAlgorithmCache;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** Options shared by every command that loads a model. */
final class ModelOptions {
    @Option(names = "--model", paramLabel = "DIR|FILE.gguf",
            description = "Hugging Face model directory (config.json + safetensors), or a llama GGUF file (weights only so far: its tokenizer is not read"
                    + " yet); required.")
    Path model;

    /** The model directory; an IllegalArgumentException (one clear line) when --model was not given. */
    Path dir() {
        if (model == null) {
            throw new IllegalArgumentException("--model DIR is required");
        }
        return model;
    }

    @Option(names = "--load-format", defaultValue = "safetensors", paramLabel = "FORMAT",
            description = "safetensors (default) or dummy: seeded random bf16 weights of config.json's shapes, for benchmarks.")
    String loadFormat;

    @Option(names = "--quantization", defaultValue = "none", paramLabel = "none|fp8|fp8-row|fp8-block",
            description = "Quantize the linear layers of a bf16 release at load (default none: served as published). fp8 = fp8-block: E4M3 "
                    + "with one scale a 128x128 block; fp8-row: one an output row. Lossy: measure it with spindle kl. CPU backend only for now.")
    String quantization;

    /** The --quantization choice. */
    Quantization quantization() {
        return Quantization.parse(quantization);
    }

    @Option(names = "--kv-cache-dtype", defaultValue = "bf16", paramLabel = "bf16|fp8|q8|q4",
            description = "How the KV cache stores K and V (default bf16: exact). fp8: E4M3 with a scale a head vector; q8 / q4: 8- / 4-bit "
                    + "integers in groups of 32 with a scale each. Lossy: measure it with spindle kl. CPU backend only for now.")
    String kvCacheDtype;

    /** The --kv-cache-dtype choice. */
    KvDtype kvDtype() {
        return KvDtype.parse(kvCacheDtype);
    }

    @Option(names = "--cuda-kernels", defaultValue = "full", paramLabel = "full|portable",
            description = "CUDA: which kernels run. full (default): the build's code for this GPU, with Hopper's wgmma, tensor-memory-copy and"
                    + " linear_rows kernels on an H100/H200; portable: only the kernels every supported GPU runs, from sm_80 PTX compiled by the"
                    + " driver (what an A100, L4 or RTX card runs; slower on Hopper).")
    String cudaKernels;

    @Option(names = "--gpu-memory-limit", defaultValue = "0", paramLabel = "SIZE",
            description = "CUDA: device memory Spindle may use in all (weights, activations, KV pool), e.g. 24GiB: serve as on a card of that"
                    + " size, or beside other work on the GPU (default 0: the whole device).")
    String gpuMemoryLimit;

    /** The --gpu-memory-limit in bytes (0: none). */
    long gpuMemoryLimit() {
        try {
            return dev.spindle.backend.cuda.CudaOptions.parseMemory(gpuMemoryLimit);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), e.getMessage());
        }
    }

    /** The --cuda-kernels choice. */
    dev.spindle.backend.cuda.KernelSet cudaKernels() {
        return dev.spindle.backend.cuda.KernelSet.parse(cudaKernels);
    }

    @Option(names = "--threads", paramLabel = "N", description = "CPU backend threads (default: all cores).")
    Integer threads;

    @Option(names = "--block-size", defaultValue = "16", paramLabel = "TOKENS", description = "Tokens per KV block (default 16).")
    int blockSize;

    @Option(names = "--gemm-cache", defaultValue = "${sys:user.home}/.cache/spindle", paramLabel = "DIR|none",
            description = "CUDA: folder caching the GEMM algorithms pinned per weight shape, so a restart skips their search and pins "
                    + "the same ones (default ~/.cache/spindle; none: search at every start).")
    String gemmCache;

    /** The GEMM algorithm cache folder, or null for none. */
    Path gemmCacheDir() {
        return GemmAlgorithmCache.folder(gemmCache);
    }

    LoadFormat format() {
        return LoadFormat.parse(loadFormat);
    }

    int threadCount() {
        return threads != null ? threads : Runtime.getRuntime().availableProcessors();
    }

    LoadedModel load() {
        return load(HostReads.AT_LOAD);
    }

    /** The model, its mapped tensors read into memory when {@code reads} says (a device backend's upload reads them itself). */
    LoadedModel load(HostReads reads) {
        ProgressBar bar = ProgressBar.forTerminal("loading " + dir().getFileName());
        LoadedModel m = ModelLoader.load(dir(), format(), bar, reads, quantization());
        bar.done();
        return m;
    }

    /** Blocks for {@code tokens} positions. */
    int blocksFor(int tokens) {
        return (tokens + blockSize - 1) / blockSize;
    }
}

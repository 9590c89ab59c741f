package dev.spindle.server;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code spindle serve} flags, mapped onto the typed configuration ({@link SpindleConfig})
 * as system properties before Quarkus starts.
 */
@Command(name = "spindle serve", mixinStandardHelpOptions = true, description = "Serve a model over the OpenAI-compatible HTTP API.")
final class ServeOptions {
    @Option(names = "--model", paramLabel = "DIR", description = "Model directory (default models/spindle-chat-target).")
    String model;
    @Option(names = "--load-format", paramLabel = "FORMAT", description = "safetensors or dummy.")
    String loadFormat;
    @Option(names = "--quantization", paramLabel = "none|fp8|fp8-block|fp8-row",
            description = "Quantize a bf16 release's linear layers at load (default none; lossy: its KL is disclosed).")
    String quantization;
    @Option(names = "--kv-cache-dtype", paramLabel = "bf16|fp8|q8|q4",
            description = "How the KV cache stores K and V (default bf16; lossy: its KL is disclosed; CUDA: bf16 and fp8).")
    String kvCacheDtype;
    @Option(names = "--cuda-kernels", paramLabel = "full|portable",
            description = "CUDA: full (default) or portable: only the kernels every supported GPU runs (sm_80 PTX compiled by the driver).")
    String cudaKernels;
    @Option(names = "--gpu-memory-limit", paramLabel = "SIZE",
            description = "CUDA: device memory to use in all (weights, activations, KV pool), e.g. 24GiB (default 0: the whole device).")
    String gpuMemoryLimit;
    @Option(names = "--served-model-name", paramLabel = "NAME", description = "The model id clients use.")
    String name;
    @Option(names = "--host", paramLabel = "HOST", description = "Listen address (default 0.0.0.0).")
    String host;
    @Option(names = "--port", paramLabel = "PORT", description = "HTTP port (default 8000).")
    Integer port;
    @Option(names = "--threads", paramLabel = "N", description = "CPU backend threads.")
    Integer threads;
    @Option(names = "--kv-cache-tokens", paramLabel = "N", description = "KV cache capacity in tokens (default 32768 on the CPU; on CUDA sized from free memory, capped by this).")
    Integer kvTokens;
    @Option(names = "--max-num-seqs", paramLabel = "N", description = "Sequences batched together at most (default 32).")
    Integer maxSeqs;
    @Option(names = "--max-num-batched-tokens", paramLabel = "N", description = "Tokens per engine step at most (default 512).")
    Integer maxBatched;
    @Option(names = "--backend", paramLabel = "auto|cpu|cuda", description = "Backend (default auto: CUDA when a GPU is usable, else CPU).")
    String backend;
    @Option(names = "--tensor-parallel-size", paramLabel = "N", description = "Tensor-parallel ranks (default 1; must divide the KV heads). CPU: computes that split's numerics; CUDA: one GPU only for now.")
    Integer tensorParallel;
    @Option(names = "--kv-memory-fraction", paramLabel = "F", description = "CUDA: share of the device memory left after weights for the KV pool (default 0.9).")
    Double kvFraction;
    @Option(names = "--cuda-graphs", paramLabel = "true|false", arity = "1", description = "CUDA: replay decode steps as CUDA graphs (default true).")
    Boolean cudaGraphs;
    @Option(names = "--async-scheduling", paramLabel = "true|false", arity = "1",
            description = "Start each plain decode step before the previous step's tokens reach the host (CUDA; default true).")
    Boolean asyncScheduling;
    @Option(names = "--gemm-cache", paramLabel = "DIR|none", description = "CUDA: folder caching the pinned GEMM algorithms (default ~/.cache/spindle; none: search at every start).")
    String gemmCache;
    @Option(names = "--block-size", paramLabel = "TOKENS", description = "Tokens per KV block (default 16; a power of two on CUDA).")
    Integer blockSize;
    @Option(names = "--default-max-tokens", paramLabel = "N", description = "A cap on max_tokens when a request gives none (default: what the context leaves after the prompt).")
    Integer defaultMaxTokens;
    @Option(names = "--max-logprobs", paramLabel = "N", description = "Alternatives a request may ask for per token at most (top_logprobs, prompt_logprobs; default 20).")
    Integer maxLogprobs;
    @Option(names = "--responses-store-max", paramLabel = "N", description = "Responses API: responses kept for previous_response_id and GET /v1/responses/{id} (default 1000; 0: none).")
    Integer responsesStoreMax;
    @Option(names = "--responses-store-ttl", paramLabel = "DURATION", description = "Responses API: how long a stored response is kept (default 1h; e.g. 30m, 2h).")
    String responsesStoreTtl;
    @Option(names = "--speculative-method", paramLabel = "none|draft|ngram|dflash", description = "Speculative decoding: draft (a draft model, --draft-model), ngram (prompt lookup) or dflash (a DFlash head, --draft-model DIR); default none.")
    String specMethod;
    @Option(names = "--draft-model", paramLabel = "DIR", description = "The draft model (same tokenizer as the served model) for --speculative-method draft; the DFlash head for dflash.")
    String draftModel;
    @Option(names = "--num-speculative-tokens", paramLabel = "K", description = "Tokens drafted per step at most (default 4).")
    Integer specTokens;
    @Option(names = "--prompt-lookup-min", paramLabel = "N", description = "ngram: shortest suffix matched (default 1).")
    Integer ngramMin;
    @Option(names = "--prompt-lookup-max", paramLabel = "N", description = "ngram: longest suffix matched (default 4).")
    Integer ngramMax;
    @Option(names = "--speculative-max-batch", paramLabel = "N", description = "Draft only while at most this many sequences decode in a step (default 16).")
    Integer specMaxBatch;
    @Option(names = "--dflash-tap-offset", paramLabel = "1|2", description = "dflash: 1 reads the output of each target_layer_id (the paper's; default), 2 one layer deeper.")
    Integer dflashTapOffset;
    @Option(names = "--dflash-block-size", paramLabel = "B", description = "dflash: rows of a draft block (default: the head's block_size).")
    Integer dflashBlockSize;
    @Option(names = "--dflash-sampled-drafts", paramLabel = "true|false", arity = "0..1", fallbackValue = "true",
            description = "dflash, at temperature > 0: drafts drawn from the head's distribution (DFlash2: its sampled walk), verified on the host "
                    + "(default false: deterministic drafts verified on the device).")
    Boolean dflashSampledDrafts;
    @Option(names = "--dflash-head-quantization", paramLabel = "none|affine4",
            description = "dflash: affine4 packs the head's linear layers at load to 4-bit affine codes (CPU backend; lossy, see docs/KL.md); "
                    + "none (default) keeps them as stored.")
    String dflashHeadQuantization;
    @Option(names = "--max-waiting-requests", paramLabel = "N", description = "Requests waiting to start at most; beyond, 429 with Retry-After (default 256).")
    Integer maxWaiting;
    @Option(names = "--api-key", paramLabel = "KEY", description = "Require Authorization: Bearer KEY on /v1, /tokenize and /detokenize.")
    String apiKey;
    @Option(names = "--api-key-file", paramLabel = "FILE", description = "As --api-key, the key read from FILE (trailing newline ignored): keeps it out of the process list.")
    java.nio.file.Path apiKeyFile;
    @Option(names = "--cors-origins", paramLabel = "ORIGINS", description = "Browser origins allowed to call the API, comma-separated (e.g. http://localhost:3000; * for any). Default: none.")
    String corsOrigins;
    @Option(names = "--management-port", paramLabel = "PORT", description = "Serve /q/metrics and /q/health on this port only (default: on the API port).")
    Integer managementPort;
    @Option(names = "--management-host", paramLabel = "HOST", description = "Listen address of the management port (default: --host).")
    String managementHost;
    @Option(names = "-D", paramLabel = "KEY=VALUE", description = "Any configuration key, e.g. -Dspindle.max-num-seqs=64 (the launcher passes these to the JVM).")
    java.util.Map<String, String> properties;

    /** Parses {@code args}; false when only help was asked for (printed) or the flags were wrong. */
    static boolean apply(String[] args) {
        ServeOptions o = new ServeOptions();
        CommandLine cl = new CommandLine(o);
        try {
            cl.parseArgs(args);
        } catch (CommandLine.ParameterException e) {
            System.err.println("spindle serve: " + e.getMessage());
            cl.usage(System.err);
            System.exit(2);
        }
        if (cl.isUsageHelpRequested() || cl.isVersionHelpRequested()) {
            cl.usage(System.out);
            return false;
        }
        set("spindle.model", o.model);
        set("spindle.load-format", o.loadFormat);
        set("spindle.served-model-name", o.name);
        set("spindle.quantization", o.quantization);
        set("spindle.kv-cache-dtype", o.kvCacheDtype);
        set("spindle.cuda-kernels", o.cudaKernels);
        set("spindle.gpu-memory-limit", o.gpuMemoryLimit);
        set("quarkus.http.host", o.host);
        set("quarkus.http.port", o.port);
        set("spindle.threads", o.threads);
        set("spindle.kv-cache-tokens", o.kvTokens);
        set("spindle.max-num-seqs", o.maxSeqs);
        set("spindle.max-num-batched-tokens", o.maxBatched);
        set("spindle.backend", o.backend);
        set("spindle.tensor-parallel-size", o.tensorParallel);
        set("spindle.kv-memory-fraction", o.kvFraction);
        set("spindle.cuda-graphs", o.cudaGraphs);
        set("spindle.async-scheduling", o.asyncScheduling);
        set("spindle.gemm-cache", o.gemmCache);
        set("spindle.block-size", o.blockSize);
        set("spindle.default-max-tokens", o.defaultMaxTokens);
        set("spindle.max-logprobs", o.maxLogprobs);
        set("spindle.responses.store-max-entries", o.responsesStoreMax);
        set("spindle.responses.store-ttl", o.responsesStoreTtl);
        set("spindle.max-waiting-requests", o.maxWaiting);
        set("spindle.speculative.method", o.specMethod);
        set("spindle.speculative.draft-model", o.draftModel);
        set("spindle.speculative.num-tokens", o.specTokens);
        set("spindle.speculative.prompt-lookup-min", o.ngramMin);
        set("spindle.speculative.prompt-lookup-max", o.ngramMax);
        set("spindle.speculative.max-batch", o.specMaxBatch);
        set("spindle.speculative.dflash-tap-offset", o.dflashTapOffset);
        set("spindle.speculative.dflash-block-size", o.dflashBlockSize);
        set("spindle.speculative.dflash-sampled-drafts", o.dflashSampledDrafts);
        set("spindle.speculative.dflash-head-quantization", o.dflashHeadQuantization);
        if (o.apiKey != null && o.apiKey.isBlank()) {
            fail(cl, "--api-key is empty: give a key, or leave the flag out to serve without one");
        }
        set("spindle.api-key", o.apiKey == null ? null : o.apiKey.strip());
        set("quarkus.http.cors.origins", o.corsOrigins);
        set("spindle.management-port", o.managementPort);
        set("spindle.management-host", o.managementHost);
        if (o.apiKeyFile != null) {
            if (o.apiKey != null) {
                fail(cl, "give --api-key or --api-key-file, not both");
            }
            try {
                String key = java.nio.file.Files.readString(o.apiKeyFile).strip();
                if (key.isEmpty()) {
                    fail(cl, "--api-key-file " + o.apiKeyFile + " is empty");
                }
                set("spindle.api-key", key);
            } catch (java.io.IOException | java.io.UncheckedIOException e) {
                fail(cl, "--api-key-file " + o.apiKeyFile + ": cannot read it (" + e + ")");
            }
        }
        if (o.properties != null) {
            o.properties.forEach(ServeOptions::set);
        }
        return true;
    }

    private static void fail(CommandLine cl, String message) {
        System.err.println("spindle serve: " + message);
        System.exit(2);
    }

    private static void set(String key, Object value) {
        if (value != null) {
            System.setProperty(key, value.toString());
        }
    }
}

package dev.spindle.server;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;

import java.util.Optional;
import java.util.OptionalInt;

/**
 * The server's typed configuration ({@code spindle.*} in application.properties, or the
 * {@code serve} command's flags). No environment-variable switches.
 */
@ConfigMapping(prefix = "spindle")
public interface SpindleConfig {
    /** The Hugging Face model directory, or the llama GGUF file, to serve. */
    @WithDefault("models/spindle-chat-target")
    String model();

    /** safetensors, or dummy (seeded random weights of config.json's shapes). */
    @WithDefault("safetensors")
    String loadFormat();

    /**
     * none (served as the checkpoint stores it), or fp8 / fp8-block / fp8-row: the linear layers of a bf16 release quantized
     * at load (lossy; the start log and /v1/models disclose the KL measured for it).
     */
    @WithDefault("none")
    String quantization();

    /** bf16 (exact), or fp8 / q8 / q4: how the KV cache stores K and V (lossy; disclosed with its KL). CUDA: bf16 and fp8. */
    @WithDefault("bf16")
    String kvCacheDtype();

    /**
     * CUDA: which kernels run. full: the build's code for this GPU (with Hopper's wgmma, tensor-memory-copy and linear_rows
     * kernels on an H100/H200); portable: only the kernels every supported GPU runs, from sm_80 PTX the driver compiles.
     */
    @WithDefault("full")
    String cudaKernels();

    /**
     * CUDA: device memory Spindle may use in all (weights, activations, KV pool), e.g. 24GiB, as on a card of that size or
     * beside other work on the GPU; 0: the whole device.
     */
    @WithDefault("0")
    String gpuMemoryLimit();

    /** The model id clients use; defaults to the directory's name (a GGUF file's without .gguf). */
    Optional<String> servedModelName();

    /** auto (CUDA when a GPU is usable, else CPU), cpu or cuda. The choice and its reason are logged at start. */
    @WithDefault("auto")
    String backend();

    /** CPU backend threads; defaults to all cores. */
    OptionalInt threads();

    /**
     * KV cache capacity in tokens (all sequences together). Default: 32768 on the CPU; on CUDA the
     * pool takes {@link #kvMemoryFraction()} of the device memory left after weights, capped by this when set.
     */
    OptionalInt kvCacheTokens();

    /**
     * Tensor-parallel ranks the model is split over (Megatron style, {@code backend.TensorParallelLayout}); must divide
     * the model's KV heads and intermediate size. The CPU backend computes that split's numerics; the CUDA backend runs
     * one GPU and refuses more than 1 (several GPUs: not available yet).
     */
    @WithDefault("1")
    int tensorParallelSize();

    /** CUDA: the share of device memory free after weights and activations that the KV pool takes. */
    @WithDefault("0.9")
    double kvMemoryFraction();

    /** CUDA: replay decode steps as captured CUDA graphs (one launch per step instead of ~15 per layer). */
    @WithDefault("true")
    boolean cudaGraphs();

    /**
     * CUDA: the folder caching the GEMM algorithms pinned per weight shape and device, so a restart skips
     * their search (about 15 s for the 33B model) and pins the same ones; {@code none}: search at every start.
     */
    @WithDefault("${user.home}/.cache/spindle")
    String gemmCache();

    /**
     * Asynchronous scheduling: each plain decode step starts on the backend before the previous step's tokens reach the
     * host (its tokens taken on the device from that step's draws), so the host's part of a step (reading and emitting the
     * tokens, building and sending the next plan) overlaps the GPU's. Same tokens for every request either way. CUDA only
     * (other backends run as without it). On by default: through the engine it never lost in 48 alternated pairs over four H100 calls
     * (+0.2-0.6% on the 33B shape, +1.3-2.7% on the 3B at 1 and 32 streams; docs/bench/async-scheduling, merge-wide).
     */
    @WithDefault("true")
    boolean asyncScheduling();

    /** Tokens per KV block. */
    @WithDefault("16")
    int blockSize();

    /** Sequences decoded together at most. */
    @WithDefault("32")
    int maxNumSeqs();

    /** Tokens computed per engine step at most (prefill chunks are cut to fit). */
    @WithDefault("512")
    int maxNumBatchedTokens();

    /** When set, /v1 requests need {@code Authorization: Bearer <key>}. */
    Optional<String> apiKey();

    /** Requests waiting for admission at most; beyond it new requests get 429 with Retry-After. */
    @WithDefault("256")
    int maxWaitingRequests();

    /**
     * When set, /q/metrics and /q/health are served on this port only (the API port answers 404 there),
     * so that the API port can be exposed alone.
     */
    OptionalInt managementPort();

    /** The management port's listen address; defaults to quarkus.http.host. */
    Optional<String> managementHost();

    /**
     * A cap on max_tokens when a request gives none; without it such a request may use what the context leaves
     * after its prompt (as OpenAI and vLLM do: a thinking model often needs several thousand tokens).
     */
    OptionalInt defaultMaxTokens();

    /** The most alternatives a request may ask for per token (top_logprobs, logprobs, prompt_logprobs). */
    @WithDefault("20")
    int maxLogprobs();

    /** The Responses API's store of recent responses (for previous_response_id and GET /v1/responses/{id}). */
    Responses responses();

    interface Responses {
        /** Responses kept at most; the oldest is dropped first. 0 turns the store off. */
        @WithDefault("1000")
        int storeMaxEntries();

        /** How long a stored response is kept. */
        @WithDefault("1h")
        java.time.Duration storeTtl();
    }

    /** Speculative decoding ({@code spindle.speculative.*}). */
    Speculative speculative();

    interface Speculative {
        /** none, draft (a draft model), ngram (prompt lookup) or dflash (a DFlash / DFlash2 head). The choice is logged at start. */
        @WithDefault("none")
        String method();

        /** The draft model's directory (same tokenizer as the served model), for method draft; the head's, for dflash. */
        Optional<String> draftModel();

        /** dflash: 1 reads the output of each target_layer_id (the paper's), 2 one layer deeper. */
        @WithDefault("1")
        int dflashTapOffset();

        /** dflash: rows of a draft block; 0 takes the head's block_size. */
        @WithDefault("0")
        int dflashBlockSize();

        /**
         * dflash, at temperature &gt; 0: drafts drawn from the head's distribution (DFlash2: its sampled walk) and verified against
         * it on the host; false: deterministic drafts, whose rows the device draws by plain sampling's rule.
         */
        @WithDefault("false")
        boolean dflashSampledDrafts();

        /**
         * dflash: none keeps the head's linear layers as stored; affine4 packs them at load to 4-bit affine codes (groups of 64 or 32,
         * a bf16 scale and bias each; CPU backend), lossy and disclosed in docs/KL.md.
         */
        @WithDefault("none")
        String dflashHeadQuantization();

        /** Tokens drafted per step at most. */
        @WithDefault("4")
        int numTokens();

        /** ngram: the shortest suffix matched. */
        @WithDefault("1")
        int promptLookupMin();

        /** ngram: the longest suffix matched. */
        @WithDefault("4")
        int promptLookupMax();

        /**
         * Drafting stops while more sequences than this decode in one step: verification rows stop being nearly free once a
         * step is no longer bound by reading the weights (33B shape on the H200: prompt lookup 1.14x plain at batch 8, 0.95x at 32).
         */
        @WithDefault("16")
        int maxBatch();
    }
}

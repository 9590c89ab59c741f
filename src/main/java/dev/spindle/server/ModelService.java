package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cuda.GemmAlgorithmCache;
import dev.spindle.chat.ChatFormat;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.engine.Engine;
import dev.spindle.engine.EngineStats;
import dev.spindle.engine.SpecStats;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.eval.KlDisclosure;
import dev.spindle.grammar.TokenTexts;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.Quantization;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.KvDtype;
import dev.spindle.tokenizer.Tokenizer;
import dev.spindle.wiring.Backends;
import dev.spindle.wiring.Proposers;
import io.quarkus.logging.Log;
import io.quarkus.runtime.Startup;
import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import dev.spindle.wiring.ModelFiles;

/**
 * Loads the configured model in the background at startup and owns the engine that serves
 * it. Until loading (and one warm-up generation) is done, {@link #ready()} is false: the API
 * answers 503 and readiness is down. A model that cannot be loaded stops the server with the
 * loader's message.
 */
@ApplicationScoped
@Startup
public class ModelService {
    /** Everything that exists once the model is loaded. */
    private record Loaded(Backends.Opened backend, Tokenizer tokenizer, ChatTemplate template, Engine engine,
                          String servedName, JsonNode generationDefaults, TokenTexts tokenTexts,
                          Set<Integer> eosIds) {
    }

    private final SpindleConfig config;
    private final String servedName;
    private volatile Loaded loaded;

    public ModelService(SpindleConfig config) {
        this.config = config;
        Path dir = Path.of(config.model());
        // the directory's name, or a GGUF file's without its extension (as llama.cpp's server and Ollama name it)
        this.servedName = config.servedModelName().orElse(dir.toAbsolutePath().normalize().getFileName().toString().replaceFirst("\\.gguf$", ""));
        Thread.ofPlatform().name("spindle-loader").daemon().start(() -> {
            try {
                loaded = load(dir);
            } catch (Throwable t) {
                Log.errorf("cannot serve %s: %s", dir, t.getMessage());
                io.quarkus.runtime.Quarkus.asyncExit(1);
            }
        });
    }

    private Loaded load(Path dir) {
        if (config.maxWaitingRequests() < 1) {
            throw new IllegalArgumentException("spindle.max-waiting-requests (--max-waiting-requests) must be at least 1, got " + config.maxWaitingRequests());
        }
        if (config.defaultMaxTokens().isPresent() && config.defaultMaxTokens().getAsInt() < 1) {
            throw new IllegalArgumentException("spindle.default-max-tokens (--default-max-tokens) must be at least 1, got " + config.defaultMaxTokens().getAsInt());
        }
        LoadFormat format = LoadFormat.parse(config.loadFormat());
        long t0 = System.nanoTime();
        Tokenizer tokenizer = ModelFiles.tokenizer(dir);
        ChatTemplate template = ModelFiles.chatTemplate(dir);
        int threads = config.threads().orElse(Runtime.getRuntime().availableProcessors());
        Backends.Kind kind = Backends.Kind.parse(config.backend());
        boolean cpu = !Backends.resolve(kind).cuda();
        Backends.Settings settings = new Backends.Settings(threads, config.blockSize(), config.kvCacheTokens().orElse(cpu ? 32768 : 0),
                Math.max(config.maxNumBatchedTokens(), config.maxNumSeqs()), config.kvMemoryFraction(), config.cudaGraphs(),
                GemmAlgorithmCache.folder(config.gemmCache())).withTensorParallel(config.tensorParallelSize())
                .withQuantization(Quantization.parse(config.quantization())).withKvDtype(KvDtype.parse(config.kvCacheDtype()))
                .withCudaKernels(dev.spindle.backend.cuda.KernelSet.parse(config.cudaKernels()))
                .withGpuMemoryLimit(dev.spindle.backend.cuda.CudaOptions.parseMemory(config.gpuMemoryLimit()));
        var sc = config.speculative();
        var specConfig = new SpeculativeConfig(SpeculativeConfig.Method.parse(sc.method()),
                sc.draftModel().map(Path::of).orElse(null), sc.numTokens(), sc.promptLookupMin(), sc.promptLookupMax(), sc.maxBatch(),
                sc.dflashTapOffset(), sc.dflashBlockSize(), sc.dflashSampledDrafts(),
                SpeculativeConfig.HeadWeights.parse(sc.dflashHeadQuantization()));
        Backends.Opened backend = Backends.open(dir, format, kind, Proposers.targetSettings(specConfig, settings), LoadListener.NONE);
        ModelConfig mc = backend.config();
        Set<Integer> eos = ChatFormat.of(mc).endOfTurnIds(mc, tokenizer);
        Speculation speculation;
        try {
            speculation = Proposers.open(specConfig, dir, backend, format, settings, LoadListener.NONE);
        } catch (RuntimeException e) {
            backend.close();
            throw e;
        }
        if (speculation.enabled()) {
            Log.infof("speculative decoding: %s; %s", specConfig.describe(), speculation.proposer().describe());
        }
        if (config.asyncScheduling()) {
            boolean taps = speculation.enabled() && speculation.proposer().tapLayers().length > 0;
            Log.info(!backend.pass().runsAhead() ? "async scheduling: not used (this backend runs each step to its end)"
                    : taps ? "async scheduling: not used beside a draft head that reads the target's hidden states"
                    : speculation.enabled() ? "async scheduling: plain decode steps start before the previous step's tokens reach the host"
                            + " while more sequences decode than speculative decoding drafts for (--speculative-max-batch)"
                    : "async scheduling: plain decode steps start before the previous step's tokens reach the host");
        }
        Engine engine = new Engine(backend.pass(), config.maxNumBatchedTokens(), config.maxNumSeqs(), eos, config.maxWaitingRequests(), speculation,
                config.asyncScheduling());
        var texts = ModelFiles.tokenTexts(dir, tokenizer, mc.vocabSize());
        long tw = System.nanoTime();
        warmUp(engine, tokenizer);
        long ready = System.nanoTime();
        Log.infof("serving %s (%s, %d layers%s, %,d parameters) on %s; ready in %.1f s (the warm-up generation %.2f s of it)",
                servedName, mc.architecture(), mc.numLayers(), mc.numLoops() > 1 ? " x " + mc.numLoops() + " loops" : "", mc.parameterCount(),
                backend.description(), (ready - t0) / 1e9, (ready - tw) / 1e9);
        String kv = KvDtype.parse(config.kvCacheDtype()).label;
        String quantization = Quantization.parse(config.quantization()).label;
        Log.infof("weights %s, KV cache %s: %s", backend.weights(), kv, fileQuantized(backend.weights(), quantization) ? FILE_QUANTIZED
                : KlDisclosure.shipped().line(quantization, kv));
        return new Loaded(backend, tokenizer, template, engine, servedName, readGenerationConfig(dir.resolve("generation_config.json")),
                texts, eos);
    }

    /**
     * What /v1/models discloses of the numerics served: the linear layers' format, the quantization applied at load, the KV
     * cache's dtype, and for a lossy configuration the KL measured for it on the bundled model (null when served as published).
     */
    public Map<String, Object> disclosure() {
        String q = Quantization.parse(config.quantization()).label, kv = KvDtype.parse(config.kvCacheDtype()).label;
        boolean file = fileQuantized(l().backend().weights(), q), lossless = !file && q.equals("none") && kv.equals("bf16");
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("weights", l().backend().weights());
        d.put("quantization", q);
        d.put("kv_cache", kv);
        KlDisclosure kl = KlDisclosure.shipped();
        d.put("kl", lossless ? null : file ? FILE_QUANTIZED : kl.find(q, kv).map(m -> (Object) m).orElse("not measured"));
        if (!lossless) {
            d.put("kl_about", kl.about());
        }
        return d;
    }

    /** What is disclosed of a file whose weights are stored quantized (a GGUF's ggml blocks): lossy, measured by the user. */
    static final String FILE_QUANTIZED = "lossy: the checkpoint stores its weights quantized; Spindle has no KL measured for it (spindle kl --model"
            + " CHECKPOINT --baseline-model RELEASE_DIR measures it; docs/KL.md has the GGUF rungs of the bundled model)";

    /**
     * Whether the weights served are a checkpoint's quantized values (a GGUF's blocks, MLX affine codes, fp8 as stored)
     * rather than bf16 values or a quantization Spindle applied at load (disclosed with its own measured KL).
     */
    static boolean fileQuantized(String weights, String quantization) {
        return !weights.equals("bf16") && quantization.equals("none");
    }

    /** Whether the model is loaded and warmed up. */
    public boolean ready() {
        return loaded != null;
    }

    private Loaded l() {
        Loaded x = loaded;
        if (x == null) {
            throw new IllegalStateException("the model is still loading");
        }
        return x;
    }

    /** The engine's latest stats, or an empty snapshot while loading. */
    public EngineStats stats() {
        Loaded x = loaded;
        return x == null ? new EngineStats(0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, SpecStats.NONE) : x.engine().stats();
    }

    /** One short generation before the server reports ready: the first real request does not pay for JIT warm-up. */
    private static void warmUp(Engine engine, Tokenizer tokenizer) {
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        int[] prompt = tokenizer.encode("warm up");
        if (prompt.length == 0) {
            return;
        }
        engine.submit(prompt, SamplingParams.greedy(4), new TokenSink() {
            @Override
            public void onToken(TokenEvent e) {
                if (e.finishReason() != null) {
                    done.countDown();
                }
            }

            @Override
            public void onError(Throwable error) {
                Log.warn("warm-up failed: " + error.getMessage());
                done.countDown();
            }
        });
        try {
            done.await(120, java.util.concurrent.TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static JsonNode readGenerationConfig(Path file) {
        if (!Files.isRegularFile(file)) {
            return new ObjectMapper().createObjectNode();
        }
        try {
            return new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": not valid JSON: " + e.getMessage(), e);
        }
    }

    public Engine engine() {
        return l().engine();
    }

    public Tokenizer tokenizer() {
        return l().tokenizer();
    }

    public ChatTemplate template() {
        return l().template();
    }

    public String servedName() {
        return servedName;
    }

    /** The served model's configuration. */
    public ModelConfig modelConfig() {
        return l().backend().config();
    }

    /** The model's generation_config.json (defaults for temperature, top_p, top_k). */
    public JsonNode generationDefaults() {
        return l().generationDefaults();
    }

    /** Each token's text, for constrained decoding. */
    public TokenTexts tokenTexts() {
        return l().tokenTexts();
    }

    /** The served model's chat dialect (tags, terminators, reasoning, reply parsing). */
    public ChatFormat chatFormat() {
        return ChatFormat.of(modelConfig());
    }

    /** Ids that end a reply (EOS and the template's end-of-turn). */
    public Set<Integer> eosIds() {
        return l().eosIds();
    }

    public SpindleConfig config() {
        return config;
    }

    @PreDestroy
    void close() {
        Loaded x = loaded;
        if (x != null) {
            x.engine().close();
            x.backend().close();
            x.tokenizer().close();
        }
    }
}

package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.engine.Engine;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.tokenizer.Tokenizer;
import io.quarkus.logging.Log;
import io.quarkus.runtime.Startup;
import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

/** Loads the configured model once at startup and owns the engine that serves it. */
@ApplicationScoped
@Startup
public class ModelService {
    private final LoadedModel model;
    private final Tokenizer tokenizer;
    private final ChatTemplate template;
    private final CpuForwardPass backend;
    private final Engine engine;
    private final String servedName;
    private final JsonNode generationDefaults;
    private final SpindleConfig config;
    private final dev.spindle.engine.grammar.TokenTexts tokenTexts;
    private final Set<Integer> eosIds;

    public ModelService(SpindleConfig config) {
        this.config = config;
        Path dir = Path.of(config.model());
        LoadFormat format = LoadFormat.parse(config.loadFormat());
        long t0 = System.nanoTime();
        this.model = ModelLoader.load(dir, format, LoadListener.NONE);
        this.tokenizer = Tokenizer.load(dir);
        this.template = ChatTemplate.fromModelDir(dir);
        int threads = config.threads().orElse(Runtime.getRuntime().availableProcessors());
        int blocks = Math.max(1, config.kvCacheTokens() / config.blockSize());
        this.backend = new CpuForwardPass(model.config(), model.weights(), blocks, config.blockSize(), threads, KvSlots.PER_EXECUTED_LAYER);
        Set<Integer> eos = new HashSet<>(model.config().eosTokenIds());
        int imEnd = tokenizer.addedTokenId("<|im_end|>");
        if (imEnd >= 0) {
            eos.add(imEnd);
        }
        this.engine = new Engine(backend, config.maxNumBatchedTokens(), config.maxNumSeqs(), eos);
        this.eosIds = Set.copyOf(eos);
        this.tokenTexts = dev.spindle.engine.grammar.TokenTexts.load(dir.resolve("tokenizer.json"), model.config().vocabSize());
        this.servedName = config.servedModelName().orElse(dir.toAbsolutePath().normalize().getFileName().toString());
        warmUp();
        this.generationDefaults = readGenerationConfig(dir.resolve("generation_config.json"));
        Log.infof("serving %s (%s, %d layers%s, %,d parameters) on the CPU backend with %d threads; KV pool %d blocks of %d tokens; loaded in %.1f s",
                servedName, model.config().architecture(), model.config().numLayers(),
                model.config().numLoops() > 1 ? " x " + model.config().numLoops() + " loops" : "", model.config().parameterCount(),
                threads, blocks, config.blockSize(), (System.nanoTime() - t0) / 1e9);
    }

    /** One short generation before the server reports ready: the first real request does not pay for JIT warm-up. */
    private void warmUp() {
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        int[] prompt = tokenizer.encode("warm up");
        if (prompt.length == 0) {
            return;
        }
        engine.submit(prompt, dev.spindle.engine.SamplingParams.greedy(4), new dev.spindle.engine.TokenSink() {
            @Override
            public void onToken(dev.spindle.engine.TokenEvent e) {
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
        return engine;
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }

    public ChatTemplate template() {
        return template;
    }

    public String servedName() {
        return servedName;
    }

    public LoadedModel model() {
        return model;
    }

    /** The model's generation_config.json (defaults for temperature, top_p, top_k). */
    public JsonNode generationDefaults() {
        return generationDefaults;
    }

    /** Each token's text, for constrained decoding. */
    public dev.spindle.engine.grammar.TokenTexts tokenTexts() {
        return tokenTexts;
    }

    /** Ids that end a reply (EOS and the template's end-of-turn). */
    public Set<Integer> eosIds() {
        return eosIds;
    }

    public SpindleConfig config() {
        return config;
    }

    @PreDestroy
    void close() {
        engine.close();
        backend.close();
        tokenizer.close();
        model.close();
    }
}

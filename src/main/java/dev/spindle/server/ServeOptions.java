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
    @Option(names = "--kv-memory-fraction", paramLabel = "F", description = "CUDA: share of the device memory left after weights for the KV pool (default 0.9).")
    Double kvFraction;
    @Option(names = "--cuda-graphs", paramLabel = "true|false", arity = "1", description = "CUDA: replay decode steps as CUDA graphs (default true).")
    Boolean cudaGraphs;
    @Option(names = "--gemm-cache", paramLabel = "DIR|none", description = "CUDA: folder caching the pinned GEMM algorithms (default ~/.cache/spindle; none: search at every start).")
    String gemmCache;

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
        set("quarkus.http.host", o.host);
        set("quarkus.http.port", o.port);
        set("spindle.threads", o.threads);
        set("spindle.kv-cache-tokens", o.kvTokens);
        set("spindle.max-num-seqs", o.maxSeqs);
        set("spindle.max-num-batched-tokens", o.maxBatched);
        set("spindle.backend", o.backend);
        set("spindle.kv-memory-fraction", o.kvFraction);
        set("spindle.cuda-graphs", o.cudaGraphs);
        set("spindle.gemm-cache", o.gemmCache);
        return true;
    }

    private static void set(String key, Object value) {
        if (value != null) {
            System.setProperty(key, value.toString());
        }
    }
}

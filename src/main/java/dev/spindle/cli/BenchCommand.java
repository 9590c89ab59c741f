package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.backend.cpu.MemoryBandwidth;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelConfig;
import jdk.incubator.vector.FloatVector;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.Random;
import java.util.concurrent.Callable;

/**
 * {@code spindle bench}: prefill and decode speed on the CPU backend, printed as JSON,
 * with the memory read bandwidth measured in the same run as the decode limit.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = "Measure prefill and batch-1 decode speed; prints JSON. Use --load-format dummy to bench a shape without weights.")
final class BenchCommand implements Callable<Integer> {
    @Mixin
    ModelOptions model;

    @Option(names = "--prompt-tokens", defaultValue = "64", paramLabel = "N", description = "Prompt length for the prefill figure (default 64).")
    int promptTokens;

    @Option(names = "--decode-tokens", defaultValue = "16", paramLabel = "N", description = "Decode steps timed after the prompt (default 16).")
    int decodeTokens;

    @Option(names = "--warmup-tokens", defaultValue = "2", paramLabel = "N", description = "Untimed decode steps first (JIT warm-up, default 2).")
    int warmupTokens;

    @Option(names = "--bandwidth-bytes", defaultValue = "2147483648", paramLabel = "BYTES",
            description = "Buffer streamed to measure memory read bandwidth (default 2 GiB).")
    long bandwidthBytes;

    @Option(names = "--backend", defaultValue = "cpu", paramLabel = "cpu|cuda", description = "Backend to measure (default cpu).")
    String backend;

    @Option(names = "--prefill-lengths", split = ",", defaultValue = "512,2048,8192,32768", paramLabel = "N,...",
            description = "cuda: prompt lengths for the prefill figures (default 512,2048,8192,32768).")
    int[] prefillLengths;

    @Option(names = "--decode-contexts", split = ",", defaultValue = "1024,32768,131072", paramLabel = "N,...",
            description = "cuda: context lengths for batch-1 decode (default 1024,32768,131072).")
    int[] decodeContexts;

    @Option(names = "--concurrency", split = ",", defaultValue = "32,64,128", paramLabel = "N,...",
            description = "cuda: concurrent streams for aggregate decode, each with a 1K-token context (default 32,64,128).")
    int[] concurrency;

    @Option(names = "--dummy-exl3-bits", defaultValue = "0", paramLabel = "K",
            description = "cuda, with --load-format dummy: the linear layers as EXL3 of K bits a weight (1-8; random trellises, mul1), to measure"
                    + " the EXL3 kernels on a shape without a checkpoint (default 0: bf16, or --quantization).")
    int dummyExl3Bits;

    @Option(names = "--step-rows", defaultValue = "8192", paramLabel = "N", description = "cuda: most rows in one forward step (prefill chunk, default 8192).")
    int stepRows;

    @Option(names = "--cuda-graphs", defaultValue = "true", negatable = true, fallbackValue = "true",
            description = "cuda: replay decode steps as CUDA graphs (default; --no-cuda-graphs launches kernel by kernel, for profilers).")
    boolean cudaGraphs;

    @Option(names = "--kv-memory-fraction", defaultValue = "0.9", paramLabel = "F",
            description = "cuda: share of the device memory left after weights for the KV pool (default 0.9; "
                    + "a small pool lets Nsight Compute's kernel replay save and restore device memory).")
    double kvMemoryFraction;

    @Option(names = "--tensor-parallel-size", defaultValue = "1", paramLabel = "N",
            description = "cuda: split the model over N GPUs (0 to N-1) as tensor-parallel ranks (default 1); the JSON gives each rank's memory.")
    int tensorParallel;

    @Option(names = "--tensor-parallel-lanes", description = "cuda, with --tensor-parallel-size: every rank on GPU 0, each on its own stream"
            + " (measures the tensor-parallel path's own cost where one GPU is all there is; not a deployment).")
    boolean tensorParallelLanes;

    @Option(names = "--cold-page-cache", description = "Start from the disk (Linux, the checkpoint on a disk rather than tmpfs): the "
            + "checkpoint's files are read once with direct I/O (the disk's read speed, measured in this run) and dropped from the page "
            + "cache before the load; the JSON's cold_page_cache gives the load's read speed against the disk's.")
    boolean coldPageCache;

    @Option(names = "--grammar-tokenizer", paramLabel = "FILE",
            description = "Measure constrained decoding's mask per step over this tokenizer.json (.gz too) instead of a model; no --model needed.")
    java.nio.file.Path grammarTokenizer;

    @Option(names = "--grammar-sequences", defaultValue = "32", paramLabel = "N", description = "With --grammar-tokenizer: sequences masked in one step (default 32).")
    int grammarSequences;

    @Option(names = "--grammar-steps", defaultValue = "300", paramLabel = "N", description = "With --grammar-tokenizer: steps timed per grammar (default 300).")
    int grammarSteps;

    @Mixin
    SpeculativeOptions speculative;

    @Option(names = "--spec-batches", split = ",", defaultValue = "1,8,32", paramLabel = "N,...",
            description = "With --speculative-method: batch sizes at which drafted decoding is compared with plain (default 1,8,32).")
    int[] specBatches;

    @Option(names = "--spec-max-tokens", defaultValue = "128", paramLabel = "N", description = "With --speculative-method: tokens per request (default 128).")
    int specMaxTokens;

    @Option(names = "--spec-temperature", defaultValue = "0", paramLabel = "T",
            description = "With --speculative-method: sample at this temperature (seeded per request) instead of greedily (default 0: greedy); "
                    + "drafted and plain then give different tokens from the same distribution, so only their speeds are compared.")
    double specTemperature;

    @Option(names = "--spec-top-p", defaultValue = "1", paramLabel = "P", description = "With --spec-temperature: top-p (default 1).")
    double specTopP;

    @Option(names = "--spec-prompts", paramLabel = "FILE",
            description = "With --speculative-method: prompts as token ids ({\"prompts\": [[ids], ...]}) instead of the chat questions tokenized here.")
    java.nio.file.Path specPrompts;

    @Option(names = "--draft-head-cost", description = "With --backend cuda: the cost of DFlash and DFlash2 heads of the published shape beside "
            + "this target (random weights made on the GPU): context injection, one draft forward and the verification, against a decode "
            + "step, for 1, 8 and 16 sequences at once, and the speed those costs allow (a projection).")
    boolean draftHeadCost;

    @Option(names = "--gemm-split-k", description = "With --backend cuda: for each weight shape of the model, what splitting K into 1, 2 or 4 parts "
            + "would give its cuBLASLt GEMM (row-invariant and repeatable candidates, best 1-row and --prompt-tokens-row times); only config.json is read.")
    boolean gemmSplitK;

    @Option(names = "--draft-head-layers", paramLabel = "N", split = ",", defaultValue = "5",
            description = "With --draft-head-cost: the heads' layer counts to measure (comma-separated; default ${DEFAULT-VALUE}, the published "
                    + "heads' usual depth): a draft reads every layer's weights, so the share of a decode step it can reach falls with fewer.")
    int[] draftHeadLayers;

    @Option(names = "--profile-figure", paramLabel = "KIND:N",
            description = "cuda: run only this figure's work between cuProfilerStart and cuProfilerStop, for ncu --profile-from-start off: "
                    + "prefill:N, decode:CONTEXT (batch 1) or aggregate:STREAMS; N one of the lengths the bench measures.")
    String profileFigure;

    /** The generated weights' format: EXL3 where --dummy-exl3-bits asks (dummy weights only), else --quantization's. */
    private dev.spindle.backend.cuda.DummyFormat dummyFormat() {
        if (dummyExl3Bits == 0) {
            return dev.spindle.backend.cuda.DummyFormat.of(model.quantization());
        }
        if (model.format() != dev.spindle.model.LoadFormat.DUMMY || model.quantization() != dev.spindle.model.Quantization.NONE) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--dummy-exl3-bits takes --load-format dummy and no --quantization");
        }
        try {
            return dev.spindle.backend.cuda.DummyFormat.exl3(dummyExl3Bits);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--dummy-exl3-bits: " + e.getMessage());
        }
    }

    @Override
    public Integer call() throws Exception {
        var spec = speculative.config();
        if (spec.method() != SpeculativeConfig.Method.NONE) {
            return new SpecBenchRun(model, spec, backend, specBatches, specMaxTokens, promptTokens, stepRows, kvMemoryFraction, specPrompts, specTemperature,
                    specTopP).call();
        }
        if (grammarTokenizer != null) {
            return new GrammarBenchRun(grammarTokenizer, grammarSequences, grammarSteps).call();
        }
        if (gemmSplitK) {
            return new GemmSplitKRun(model, promptTokens).call();
        }
        if (draftHeadCost) {
            return new DraftHeadCostRun(model, stepRows, kvMemoryFraction, draftHeadLayers).call();
        }
        if (backend.equals("cuda")) {
            ProfiledFigure profiled = null;
            if (profileFigure != null) {
                try {
                    profiled = ProfiledFigure.parse(profileFigure, prefillLengths, decodeContexts, concurrency);
                } catch (IllegalArgumentException e) {
                    throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), e.getMessage());
                }
            }
            return new CudaBenchRun(model, prefillLengths, decodeContexts, concurrency, decodeTokens, stepRows, cudaGraphs, kvMemoryFraction,
                    tensorParallel, tensorParallelLanes, coldPageCache, profiled, dummyFormat()).call();
        }
        if (!backend.equals("cpu")) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--backend: expected cpu or cuda, got " + backend);
        }
        ColdStart cold = coldPageCache ? ColdStart.prepare(model.dir(), model.format()) : null;
        long t0 = System.nanoTime();
        try (LoadedModel m = model.load()) {
            double loadSeconds = (System.nanoTime() - t0) / 1e9;
            ModelConfig c = m.config();
            int total = promptTokens + warmupTokens + decodeTokens;
            try (CpuForwardPass cpu = new CpuForwardPass(c, m.weights(), model.blocksFor(total), model.blockSize,
                    model.threadCount(), KvSlots.PER_EXECUTED_LAYER)) {
                Random rnd = new Random(7);
                int[] prompt = rnd.ints(promptTokens, 3, c.vocabSize()).toArray();
                // an untimed prefill first: the timed one must not measure the JIT warming up
                BlockPool pool = new BlockPool(cpu.kvCapacity());
                BlockTable warm = new BlockTable(pool);
                SoloWindow.run(cpu, prompt, warm, false);
                warm.release();
                BlockTable table = new BlockTable(pool);
                long p0 = System.nanoTime();
                float[] logits = SoloWindow.run(cpu, prompt, table, false)[0];
                double prefillSeconds = (System.nanoTime() - p0) / 1e9;
                int next = GreedyGenerator.argmax(logits);
                for (int i = 0; i < warmupTokens; i++) {
                    next = GreedyGenerator.argmax(SoloWindow.run(cpu, new int[]{next}, table, false)[0]);
                }
                long d0 = System.nanoTime();
                for (int i = 0; i < decodeTokens; i++) {
                    next = GreedyGenerator.argmax(SoloWindow.run(cpu, new int[]{next}, table, false)[0]);
                }
                double decodeSeconds = (System.nanoTime() - d0) / 1e9;
                table.release();
                double bandwidth = MemoryBandwidth.readGBs(model.threadCount(), bandwidthBytes, 3);
                double decodeTps = decodeTokens / decodeSeconds;
                long weightBytes = m.weights().decodeBytes(c.numLoops()); // the weights' own formats (bf16, fp8, ggml blocks)
                double impliedGBs = decodeTps * weightBytes / 1e9;

                ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
                ObjectNode out = json.createObjectNode();
                out.put("model", m.dir().toString());
                out.put("load_format", model.format().name().toLowerCase());
                out.put("backend", "cpu");
                out.put("threads", model.threadCount());
                out.put("vector_bits", FloatVector.SPECIES_PREFERRED.vectorBitSize());
                out.put("architecture", c.architecture());
                out.put("parameters", c.parameterCount());
                out.put("load_seconds", round(loadSeconds, 3));
                if (cold != null) {
                    out.set("cold_page_cache", json.valueToTree(cold.report(loadSeconds, 0)));
                }
                ObjectNode pre = out.putObject("prefill");
                pre.put("tokens", promptTokens);
                pre.put("seconds", round(prefillSeconds, 3));
                pre.put("tokens_per_second", round(promptTokens / prefillSeconds, 2));
                pre.put("gflops_per_second", round((double) c.flopsPerToken() * promptTokens / prefillSeconds / 1e9, 1));
                ObjectNode dec = out.putObject("decode");
                dec.put("batch", 1);
                dec.put("context_tokens", promptTokens + warmupTokens);
                dec.put("tokens", decodeTokens);
                dec.put("tokens_per_second", round(decodeTps, 3));
                dec.put("weight_bytes_per_token", weightBytes);
                dec.put("implied_weight_read_gb_per_second", round(impliedGBs, 2));
                dec.put("measured_memory_read_gb_per_second", round(bandwidth, 2));
                dec.put("fraction_of_memory_bandwidth", round(impliedGBs / bandwidth, 3));
                System.out.println(json.writeValueAsString(out));
                return 0;
            }
        }
    }

    private static double round(double v, int digits) {
        double s = Math.pow(10, digits);
        return Math.round(v * s) / s;
    }
}

package dev.spindle.cli;

import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.sched.EngineCore;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.sample.SamplingParams;
import dev.spindle.wiring.Backends;
import dev.spindle.wiring.Proposers;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;

/** {@code spindle generate}: greedy continuation of a prompt given as token ids. */
@Command(name = "generate", mixinStandardHelpOptions = true,
        description = "Greedy-decode a continuation of a prompt given as token ids, on the engine the server runs.")
final class GenerateCommand implements Callable<Integer> {
    @Mixin
    ModelOptions model;

    @Option(names = "--prompt-ids", required = true, split = ",", paramLabel = "IDS", description = "Prompt token ids, comma-separated.")
    int[] promptIds;

    @Option(names = "--max-tokens", defaultValue = "32", paramLabel = "N", description = "Tokens to generate at most (default 32).")
    int maxTokens;

    @Option(names = "--ignore-eos", description = "Keep generating past the model's end-of-sequence ids.")
    boolean ignoreEos;

    @Option(names = "--prefill-chunk", defaultValue = "512", paramLabel = "TOKENS", description = "Prompt tokens per prefill window (default 512).")
    int prefillChunk;

    @Option(names = "--async-scheduling", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "Start each decode step before the previous step's token reaches the host (CUDA; as the server's --async-scheduling; "
                    + "default on, --no-async-scheduling to run each step to its end).")
    boolean asyncScheduling;

    @Mixin
    SpeculativeOptions speculative;

    @Option(names = "--backend", defaultValue = "auto", paramLabel = "auto|cpu|cuda",
            description = "Backend (default auto: CUDA when a GPU is usable, else the CPU).")
    String backend;

    @Override
    public Integer call() {
        Backends.Settings settings = new Backends.Settings(model.threadCount(), model.blockSize,
                model.blocksFor(promptIds.length + maxTokens) * model.blockSize, Math.max(prefillChunk, 1), 0.9, true, model.gemmCacheDir())
                .withQuantization(model.quantization()).withKvDtype(model.kvDtype()).withCudaKernels(model.cudaKernels()).withGpuMemoryLimit(model.gpuMemoryLimit());
        ProgressBar bar = ProgressBar.forTerminal("loading " + model.dir().getFileName());
        try (Backends.Opened b = Backends.open(model.dir(), model.format(), Backends.Kind.parse(backend),
                Proposers.targetSettings(speculative.config(), settings), bar)) {
            bar.done();
            ModelConfig c = b.config();
            for (int id : promptIds) {
                if (id < 0 || id >= c.vocabSize()) {
                    throw new IllegalArgumentException("--prompt-ids: token id " + id + " is outside the vocabulary [0, " + c.vocabSize() + ")");
                }
            }
            Set<Integer> stop = ignoreEos ? Set.of() : new HashSet<>(c.eosTokenIds());
            System.err.printf("model %s: %s, %d layers%s, hidden %d, %d/%d heads of %d, vocab %d; %s%n",
                    model.dir(), c.architecture(), c.numLayers(), c.numLoops() > 1 ? " x " + c.numLoops() + " loops" : "", c.hiddenSize(),
                    c.numHeads(), c.numKvHeads(), c.headDim(), c.vocabSize(), b.description());
            Speculation spec = Proposers.open(speculative.config(), model.dir(), b, model.format(),
                    settings, LoadListener.NONE);
            if (spec.enabled()) {
                System.err.println("speculative decoding: " + speculative.config().describe() + "; " + spec.proposer().describe());
            }
            // one request on the engine the server runs, stepped on this thread
            EngineCore core = new EngineCore(b.pass(), prefillChunk, 1, stop, spec, asyncScheduling);
            List<Integer> out = new ArrayList<>();
            long[] firstAt = {0};
            String[] finish = {null};
            Throwable[] failure = {null};
            long t0 = System.nanoTime();
            core.add(1, promptIds, SamplingParams.greedy(maxTokens).withIgnoreEos(ignoreEos), new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    if (out.isEmpty()) {
                        firstAt[0] = System.nanoTime();
                    }
                    out.add(e.token());
                    finish[0] = e.finishReason();
                }

                @Override
                public void onError(Throwable error) {
                    failure[0] = error;
                }
            });
            while (!core.idle()) {
                core.step();
            }
            long t1 = System.nanoTime();
            if (spec.enabled()) {
                spec.proposer().close();
            }
            if (failure[0] != null) {
                throw new IllegalStateException("generation failed: " + failure[0].getMessage(), failure[0]);
            }
            System.out.println(String.join(",", out.stream().map(Object::toString).toList()));
            double prefill = (firstAt[0] - t0) / 1e9, decode = (t1 - firstAt[0]) / 1e9;
            System.err.printf("%d prompt tokens at %.1f tok/s; %d generated at %.2f tok/s%s%n", promptIds.length, promptIds.length / prefill,
                    out.size(), Math.max(0, out.size() - 1) / decode, "stop".equals(finish[0]) ? " (stopped at end of sequence)" : "");
            if (spec.enabled()) {
                var st = core.stats().speculative();
                System.err.printf("drafted %d, accepted %d (%.3f), %.2f tokens a verified window%n", st.draftTokens(), st.acceptedTokens(),
                        st.acceptanceRate(), st.meanAcceptedLength());
            }
            return 0;
        }
    }
}

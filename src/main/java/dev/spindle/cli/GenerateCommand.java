package dev.spindle.cli;

import dev.spindle.backend.Backends;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.model.ModelConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.Callable;

/** {@code spindle generate}: greedy continuation of a prompt given as token ids. */
@Command(name = "generate", mixinStandardHelpOptions = true,
        description = "Greedy-decode a continuation of a prompt given as token ids, on the CPU reference backend.")
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

    @Option(names = "--backend", defaultValue = "auto", paramLabel = "auto|cpu|cuda",
            description = "Backend (default auto: CUDA when a GPU is usable, else the CPU).")
    String backend;

    @Override
    public Integer call() {
        Backends.Settings settings = new Backends.Settings(model.threadCount(), model.blockSize,
                model.blocksFor(promptIds.length + maxTokens) * model.blockSize, Math.max(prefillChunk, 1), 0.9, true, model.gemmCacheDir());
        ProgressBar bar = ProgressBar.forTerminal("loading " + model.dir().getFileName());
        try (Backends.Opened b = Backends.open(model.dir(), model.format(), Backends.Kind.parse(backend), settings, bar)) {
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
            GreedyGenerator.Result r = new GreedyGenerator(b.pass(), prefillChunk).generate(promptIds, maxTokens, stop, t -> { });
            System.out.println(String.join(",", Arrays.stream(r.tokens()).mapToObj(Integer::toString).toList()));
            System.err.printf("%d prompt tokens at %.1f tok/s; %d generated at %.2f tok/s%s%n", r.promptTokens(), r.prefillTokensPerSecond(),
                    r.tokens().length, r.decodeTokensPerSecond(), r.stoppedOnEos() ? " (stopped at end of sequence)" : "");
            return 0;
        }
    }
}

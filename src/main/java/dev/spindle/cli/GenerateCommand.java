package dev.spindle.cli;

import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.model.LoadedModel;
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

    @Override
    public Integer call() {
        try (LoadedModel m = model.load();
             CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), model.blocksFor(promptIds.length + maxTokens),
                     model.blockSize, model.threadCount(), KvSlots.PER_EXECUTED_LAYER)) {
            for (int id : promptIds) {
                if (id < 0 || id >= m.config().vocabSize()) {
                    throw new IllegalArgumentException("--prompt-ids: token id " + id + " is outside the vocabulary [0, " + m.config().vocabSize() + ")");
                }
            }
            Set<Integer> stop = ignoreEos ? Set.of() : new HashSet<>(m.config().eosTokenIds());
            System.err.printf("model %s: %s, %d layers%s, hidden %d, %d/%d heads of %d, vocab %d; CPU backend, %d threads%n",
                    m.dir(), m.config().architecture(), m.config().numLayers(),
                    m.config().numLoops() > 1 ? " x " + m.config().numLoops() + " loops" : "", m.config().hiddenSize(),
                    m.config().numHeads(), m.config().numKvHeads(), m.config().headDim(), m.config().vocabSize(), model.threadCount());
            GreedyGenerator.Result r = new GreedyGenerator(cpu, prefillChunk).generate(promptIds, maxTokens, stop, t -> { });
            System.out.println(String.join(",", Arrays.stream(r.tokens()).mapToObj(Integer::toString).toList()));
            System.err.printf("%d prompt tokens at %.1f tok/s; %d generated at %.2f tok/s%s%n", r.promptTokens(), r.prefillTokensPerSecond(),
                    r.tokens().length, r.decodeTokensPerSecond(), r.stoppedOnEos() ? " (stopped at end of sequence)" : "");
            return 0;
        }
    }
}

package dev.spindle.cli;

import dev.spindle.engine.spec.SpeculativeConfig;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** Speculative decoding flags, shared by {@code chat}, {@code generate} (and, by name, {@code serve}). */
final class SpeculativeOptions {
    @Option(names = "--speculative-method", defaultValue = "none", paramLabel = "none|draft|ngram",
            description = "Speculative decoding: draft (a draft model, --draft-model) or ngram (prompt lookup); none (default) decodes plainly. "
                    + "Greedy replies are the same token for token; sampled ones have the same distribution.")
    String method;

    @Option(names = "--draft-model", paramLabel = "DIR", description = "The draft model (same tokenizer as the target) for --speculative-method draft.")
    Path draftModel;

    @Option(names = "--num-speculative-tokens", defaultValue = "4", paramLabel = "K", description = "Tokens drafted per step at most (default 4).")
    int numTokens;

    @Option(names = "--prompt-lookup-min", defaultValue = "1", paramLabel = "N", description = "ngram: shortest suffix matched (default 1).")
    int ngramMin;

    @Option(names = "--prompt-lookup-max", defaultValue = "4", paramLabel = "N", description = "ngram: longest suffix matched (default 4).")
    int ngramMax;

    @Option(names = "--speculative-max-batch", defaultValue = "16", paramLabel = "N",
            description = "Draft only while at most this many sequences decode in one step (default 16).")
    int maxBatch;

    SpeculativeConfig config() {
        return new SpeculativeConfig(SpeculativeConfig.Method.parse(method), draftModel, numTokens, ngramMin, ngramMax, maxBatch);
    }
}

package dev.spindle.cli;

import dev.spindle.engine.speculative.SpeculativeConfig;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** Speculative decoding flags, shared by {@code chat}, {@code generate} (and, by name, {@code serve}). */
final class SpeculativeOptions {
    @Option(names = "--speculative-method", defaultValue = "none", paramLabel = "none|draft|ngram|dflash",
            description = "Speculative decoding: draft (a draft model, --draft-model), ngram (prompt lookup) or dflash (a DFlash / DFlash2 head, "
                    + "--draft-model DIR); none (default) decodes plainly. "
                    + "Greedy replies are the same token for token; sampled ones have the same distribution.")
    String method;

    @Option(names = "--draft-model", paramLabel = "DIR", description = "The draft model (same tokenizer as the target) for --speculative-method draft, "
            + "or the DFlash head's directory for dflash.")
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

    @Option(names = "--dflash-tap-offset", defaultValue = "1", paramLabel = "1|2",
            description = "dflash: 1 reads the output of each target_layer_id (HF hidden_states[id + 1], the paper's; default), 2 one layer deeper.")
    int tapOffset;

    @Option(names = "--dflash-block-size", defaultValue = "0", paramLabel = "B", description = "dflash: rows of a draft block (default 0: the head's block_size).")
    int blockSize;

    @Option(names = "--dflash-sampled-drafts", description = "dflash, at temperature > 0: draw drafts from the head's distribution (DFlash2: its sampled "
            + "walk) and verify them against it on the host, instead of deterministic drafts verified on the device (default off).")
    boolean sampledDrafts;

    @Option(names = "--dflash-head-quantization", defaultValue = "none", paramLabel = "none|affine4",
            description = "dflash: affine4 packs the head's linear layers at load to 4-bit affine codes (groups of 64 or 32, a bf16 scale and bias each; "
                    + "CPU backend), lossy: see docs/KL.md for its drafts' KL and acceptance; none (default) keeps them as stored.")
    String headQuantization;

    SpeculativeConfig config() {
        return new SpeculativeConfig(SpeculativeConfig.Method.parse(method), draftModel, numTokens, ngramMin, ngramMax, maxBatch, tapOffset, blockSize,
                sampledDrafts, SpeculativeConfig.HeadWeights.parse(headQuantization));
    }
}

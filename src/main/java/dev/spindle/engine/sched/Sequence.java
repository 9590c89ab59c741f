package dev.spindle.engine.sched;

import dev.spindle.engine.TokenSink;
import dev.spindle.engine.speculative.DraftPacer;
import dev.spindle.grammar.GrammarConstraint;
import dev.spindle.kv.BlockTable;
import dev.spindle.sample.LookaheadRandom;
import dev.spindle.sample.SamplingParams;

import java.util.Arrays;
import java.util.random.RandomGenerator;

/** A request as the scheduler tracks it: its tokens so far, its KV, its sampling state. */
public final class Sequence {
    public final long id;
    public final int promptLength;
    public final SamplingParams params;
    public final TokenSink sink;
    public final LookaheadRandom rng; // read ahead for a verification window's device draws
    public final BlockTable table;
    int[] tokens;          // prompt then generated
    int length;            // tokens in use
    int registeredBlocks;  // leading full blocks already keyed in the prefix cache
    long lastHash;         // chained hash of those blocks
    int cachedTokens;      // prompt tokens the prefix cache supplied at (first) admission
    boolean admittedOnce;
    boolean started;       // has entered the running batch at least once
    final GrammarConstraint constraint; // structured output, or null
    double[] promptLogprobs;   // per prompt position (scoring requests), else null
    int[][] promptTopIds;
    double[][] promptTopLogprobs;
    boolean promptLogprobsSent;
    final int[] counts;        // id -> occurrences in the sequence (for penalties; null when unused)
    final int[] outputCounts;  // id -> occurrences in the output
    DraftPacer pacer; // how much it drafts (null: it does not)
    float[][] draftQ;          // the proposer's distribution per draft of this step, or null (one-hot)
    boolean finished;          // finished, cancelled or failed: no longer in the scheduler

    Sequence(long id, int[] prompt, SamplingParams params, TokenSink sink, RandomGenerator rng, BlockTable table, int vocab) {
        this.id = id;
        this.promptLength = prompt.length;
        this.params = params;
        this.sink = sink;
        this.rng = new LookaheadRandom(rng);
        this.table = table;
        this.tokens = Arrays.copyOf(prompt, prompt.length + Math.min(params.maxTokens(), 4096));
        this.length = prompt.length;
        this.constraint = params.constraint() == null ? null : params.constraint().get();
        if (params.promptLogprobs() >= 0) {
            promptLogprobs = new double[prompt.length];
            promptLogprobs[0] = Double.NaN;
            promptTopIds = new int[prompt.length][];
            promptTopLogprobs = new double[prompt.length][];
            promptTopIds[0] = new int[0];
            promptTopLogprobs[0] = new double[0];
        }
        boolean penalties = params.repetitionPenalty() != 1 || params.presencePenalty() != 0 || params.frequencyPenalty() != 0;
        this.counts = penalties ? new int[vocab] : null;
        this.outputCounts = penalties ? new int[vocab] : null;
        if (penalties) {
            for (int t : prompt) {
                if (t >= 0 && t < vocab) {
                    counts[t]++;
                }
            }
        }
    }

    void append(int token) {
        if (length == tokens.length) {
            tokens = Arrays.copyOf(tokens, tokens.length * 2);
        }
        tokens[length++] = token;
        if (counts != null && token < counts.length) {
            counts[token]++;
            outputCounts[token]++;
        }
    }

    int generated() {
        return length - promptLength;
    }

    /** Positions whose K/V are written. */
    int computed() {
        return table.tokens();
    }

    int[] tokens(int from, int to) {
        return Arrays.copyOfRange(tokens, from, to);
    }
}

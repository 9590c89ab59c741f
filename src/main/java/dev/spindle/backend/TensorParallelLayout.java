package dev.spindle.backend;

import dev.spindle.model.ModelConfig;

/**
 * How a llama-family model splits over {@code ranks} tensor-parallel ranks, Megatron style: rank r holds
 * query heads {@code [r * qHeads, (r + 1) * qHeads)} and the KV heads they read (GQA groups stay whole),
 * so q|k|v and gate|up are column-parallel (each rank computes its own output columns in full, the bits
 * of one rank) and o_proj and down_proj row-parallel (each rank a partial product over its slice of the
 * input, then one all-reduce). Norms, the embedding and the head are replicated.
 *
 * <p>The all-reduce's numerics are fixed here, for every backend: each rank's partial is its GEMM's fp32
 * output over its slice of the input (not rounded); the partials are summed in fp32 over the ranks in rank
 * order and rounded to bf16 once, so every rank holds the same bits, a row's bits do not depend on its
 * batch, and N ranks differ from one only by where the fp32 sum of each output is cut (one bf16 rounding, as
 * at one rank). Rounding each partial to bf16 first (what an all-reduce of bf16 GEMM outputs does) was
 * measured on the CPU: on the looped fixture at 2 ranks it fell 2 top-1 flips below HF's own bf16 paths and
 * failed the fidelity gate. At one rank the sum is the GEMM's output itself (the single-GPU numerics).
 *
 * @param qHeads       query heads a rank
 * @param kvHeads      KV heads a rank
 * @param intermediate MLP columns a rank
 */
public record TensorParallelLayout(int ranks, int qHeads, int kvHeads, int intermediate, int headDim) {
    /** The layout of {@code config} over {@code ranks}, or an error naming what does not divide. */
    public static TensorParallelLayout of(ModelConfig config, int ranks) {
        if (ranks < 1) {
            throw new IllegalArgumentException("tensor-parallel size must be at least 1, got " + ranks);
        }
        if (config.numKvHeads() % ranks != 0) {
            throw new IllegalArgumentException("tensor-parallel size " + ranks + " does not divide the model's " + config.numKvHeads()
                    + " KV heads (num_key_value_heads); it must be one of " + divisors(config.numKvHeads()));
        }
        if (config.intermediateSize() % ranks != 0) {
            throw new IllegalArgumentException("tensor-parallel size " + ranks + " does not divide the model's intermediate_size "
                    + config.intermediateSize());
        }
        return new TensorParallelLayout(ranks, config.numHeads() / ranks, config.numKvHeads() / ranks,
                config.intermediateSize() / ranks, config.headDim());
    }

    private static String divisors(int n) {
        StringBuilder s = new StringBuilder();
        for (int d = 1; d <= n; d++) {
            if (n % d == 0) {
                s.append(s.isEmpty() ? "" : ", ").append(d);
            }
        }
        return s.toString();
    }

    /**
     * The shapes one rank computes, as a model config: its query and KV heads and MLP columns (the rest as {@code config}).
     * A backend runs a rank as this narrower model whose o_proj and down_proj outputs are partials to all-reduce.
     */
    public ModelConfig rankConfig(ModelConfig config) {
        if (ranks == 1) {
            return config;
        }
        return new ModelConfig(config.family(), config.architecture(), config.vocabSize(), config.hiddenSize(), intermediate,
                config.numLayers(), qHeads, kvHeads, config.headDim(), config.maxPositions(), config.rmsNormEps(), config.ropeTheta(),
                config.tiedEmbeddings(), config.numLoops(), config.skipLoopFinalNorm(), config.bosTokenId(), config.eosTokenIds());
    }

    /** A rank's query dims: heads times head dim. */
    public int qDim() {
        return qHeads * headDim;
    }

    /** A rank's K (or V) dims. */
    public int kvDim() {
        return kvHeads * headDim;
    }

    /** The first of rank r's query dims (its rows of q_proj, its columns of o_proj). */
    public int qStart(int r) {
        return r * qDim();
    }

    /** The first of rank r's K (or V) dims (its rows of k_proj and v_proj). */
    public int kvStart(int r) {
        return r * kvDim();
    }

    /** The first of rank r's MLP columns (its rows of gate_proj and up_proj, its columns of down_proj). */
    public int intermediateStart(int r) {
        return r * intermediate;
    }
}

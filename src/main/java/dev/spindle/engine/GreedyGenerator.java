package dev.spindle.engine;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.sample.Sampler;
import dev.spindle.step.ForwardPass;

import java.util.Arrays;
import java.util.Set;
import java.util.function.IntConsumer;

/**
 * Greedy decoding of one sequence: the prompt in prefill windows of at most
 * {@code prefillChunk} tokens, then one token per step until a stop id or the limit.
 * It owns a block pool over the backend's KV (so nothing else may drive that backend while it
 * runs): the simplest correct driver, for parity tests against HF's greedy continuations.
 */
public final class GreedyGenerator {
    private final ForwardPass model;
    private final BlockPool pool;
    private final int prefillChunk;

    public GreedyGenerator(ForwardPass model, int prefillChunk) {
        if (prefillChunk <= 0) {
            throw new IllegalArgumentException("prefill chunk must be positive: " + prefillChunk);
        }
        this.model = model;
        this.pool = new BlockPool(model.kvCapacity());
        this.prefillChunk = prefillChunk;
    }

    /** What a run produced and how long its phases took. */
    public record Result(int[] tokens, boolean stoppedOnEos, long prefillNanos, long decodeNanos, int promptTokens) {
        public double prefillTokensPerSecond() {
            return promptTokens / (prefillNanos / 1e9);
        }

        /** Decode steps per second (the first token comes from prefill). */
        public double decodeTokensPerSecond() {
            return Math.max(0, tokens.length - 1) / (decodeNanos / 1e9);
        }
    }

    /**
     * @param onToken called with each generated token as soon as it is chosen
     */
    public Result generate(int[] prompt, int maxTokens, Set<Integer> stopIds, IntConsumer onToken) {
        if (prompt.length == 0) {
            throw new IllegalArgumentException("the prompt needs at least one token");
        }
        if (maxTokens <= 0) {
            throw new IllegalArgumentException("max tokens must be positive: " + maxTokens);
        }
        BlockTable table = new BlockTable(pool);
        try {
            long t0 = System.nanoTime();
            float[] logits = null;
            for (int pos = 0; pos < prompt.length; pos += prefillChunk) {
                int end = Math.min(prompt.length, pos + prefillChunk);
                logits = SoloWindow.run(model, Arrays.copyOfRange(prompt, pos, end), table, false)[0];
            }
            long t1 = System.nanoTime();
            int[] out = new int[maxTokens];
            int n = 0;
            boolean eos = false;
            while (true) {
                int next = argmax(logits);
                out[n++] = next;
                onToken.accept(next);
                if (stopIds.contains(next)) {
                    eos = true;
                    break;
                }
                if (n == maxTokens) {
                    break;
                }
                logits = SoloWindow.run(model, new int[]{next}, table, false)[0];
            }
            long t2 = System.nanoTime();
            return new Result(Arrays.copyOf(out, n), eos, t1 - t0, t2 - t1, prompt.length);
        } finally {
            table.release();
        }
    }

    /** The largest logit's index, the first among equals (as torch.argmax and HF greedy). */
    public static int argmax(float[] logits) {
        return Sampler.argmax(logits);
    }
}

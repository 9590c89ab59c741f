package dev.spindle.engine.spec;

import dev.spindle.backend.ForwardPass;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.engine.kv.BlockTable;

import java.util.Arrays;
import java.util.Set;
import java.util.function.IntConsumer;

/**
 * Greedy decoding with a draft model: the drafter proposes k tokens one by one, the
 * target checks them in one window of k + 1 rows and keeps the longest agreeing prefix
 * plus its own next token; rejected positions are cut from both KV caches. Because a
 * row's logits do not depend on the window it is computed in, the output is exactly
 * plain greedy decoding's, token for token.
 */
public final class SpeculativeGreedy {
    private final ForwardPass target;
    private final ForwardPass drafter;
    private final int k;

    /** @param k tokens drafted per step */
    public SpeculativeGreedy(ForwardPass target, ForwardPass drafter, int k) {
        if (k < 1) {
            throw new IllegalArgumentException("draft length must be >= 1, got " + k);
        }
        if (target.config().vocabSize() != drafter.config().vocabSize()) {
            throw new IllegalArgumentException("target and drafter vocabularies differ: " + target.config().vocabSize() + " vs "
                    + drafter.config().vocabSize() + " (a drafter must share the target's tokenizer)");
        }
        this.target = target;
        this.drafter = drafter;
        this.k = k;
    }

    /** What a run produced: the tokens, and drafted / accepted counts (acceptance rate = accepted / drafted). */
    public record Result(int[] tokens, boolean stoppedOnEos, int drafted, int accepted, int targetSteps, long nanos) {
        public double acceptanceRate() {
            return drafted == 0 ? 0 : (double) accepted / drafted;
        }
    }

    public Result generate(int[] prompt, int maxTokens, Set<Integer> stopIds, IntConsumer onToken) {
        BlockTable t = new BlockTable(target.blockPool());
        BlockTable d = new BlockTable(drafter.blockPool());
        long t0 = System.nanoTime();
        try {
            int[] out = new int[maxTokens];
            int n = 0, drafted = 0, accepted = 0, steps = 0;
            int next = GreedyGenerator.argmax(target.forward(prompt, t, false)[0]);
            // the drafter's cache runs one token behind: it holds the prompt without its last token
            if (prompt.length > 1) {
                drafter.forward(Arrays.copyOf(prompt, prompt.length - 1), d, false);
            }
            int[] seq = Arrays.copyOf(prompt, prompt.length + maxTokens + k + 1);
            int len = prompt.length;
            boolean eos = false;
            while (true) {
                seq[len++] = next;
                out[n++] = next;
                onToken.accept(next);
                if (stopIds.contains(next)) {
                    eos = true;
                    break;
                }
                if (n == maxTokens) {
                    break;
                }
                // draft: catch the drafter up on the accepted tokens, then propose k
                int room = Math.min(k, maxTokens - n);
                int[] proposal = new int[room];
                float[] logits = drafter.forward(Arrays.copyOfRange(seq, d.tokens(), len), d, false)[0];
                for (int i = 0; i < room; i++) {
                    proposal[i] = GreedyGenerator.argmax(logits);
                    if (i + 1 < room) {
                        logits = drafter.forward(new int[]{proposal[i]}, d, false)[0];
                    }
                }
                // verify: the last accepted token and the proposal in one target window
                int[] window = new int[room + 1];
                window[0] = next;
                System.arraycopy(proposal, 0, window, 1, room);
                int base = t.tokens();
                float[][] rows = target.forward(window, t, true);
                steps++;
                drafted += room;
                int m = 0;
                while (m < room && GreedyGenerator.argmax(rows[m]) == proposal[m]) {
                    m++;
                }
                accepted += m;
                for (int i = 0; i < m; i++) {
                    seq[len++] = proposal[i];
                    out[n++] = proposal[i];
                    onToken.accept(proposal[i]);
                    if (stopIds.contains(proposal[i]) || n == maxTokens) {
                        return new Result(Arrays.copyOf(out, n), stopIds.contains(proposal[i]), drafted, accepted, steps, System.nanoTime() - t0);
                    }
                }
                next = GreedyGenerator.argmax(rows[m]);
                // keep K/V for the accepted positions only (both caches end before `next`)
                t.truncate(base + 1 + m);
                d.truncate(Math.min(d.tokens(), len - 1));
            }
            return new Result(Arrays.copyOf(out, n), eos, drafted, accepted, steps, System.nanoTime() - t0);
        } finally {
            t.release();
            d.release();
        }
    }
}

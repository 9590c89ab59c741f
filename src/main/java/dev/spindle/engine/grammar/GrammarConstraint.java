package dev.spindle.engine.grammar;

import java.util.Arrays;
import java.util.Set;

/**
 * Constrained decoding for one sequence: before each sample, tokens whose text would leave
 * the language (a JSON schema's documents, or tool calls) are masked (their logit set to
 * -infinity); end-of-sequence ids are allowed only once the text is complete. While the model
 * is still reasoning (before {@code activateAfter} is generated), nothing is masked.
 *
 * <p>The mask is one walk of the vocabulary's {@link TokenTrie} from the current state:
 * shared prefixes are stepped once, rejected prefixes cut off whole subtrees, and inside free
 * text whole subtrees of plain characters are accepted without stepping. {@link #prepare}
 * computes it ahead (on any thread, e.g. while the forward pass runs); {@link #mask} applies it.
 */
public final class GrammarConstraint {
    private final TokenTexts texts;
    private final int[] eos;
    private final int activateAfter;
    private Recognizer state;
    private boolean active;
    private long[] allowed;       // sorted-order bits of the trie's tokens, for {@code preparedFor}
    private int allowedCount;
    private Recognizer preparedFor;

    /**
     * @param activateAfter token id after which the constraint starts (e.g. {@code </think>}), or -1 to start at once
     */
    public GrammarConstraint(Schema schema, TokenTexts texts, Set<Integer> eos, int activateAfter) {
        this(JsonRecognizer.start(schema), texts, eos, activateAfter);
    }

    public GrammarConstraint(Recognizer start, TokenTexts texts, Set<Integer> eos, int activateAfter) {
        this.texts = texts;
        this.eos = eos.stream().mapToInt(Integer::intValue).sorted().toArray();
        this.activateAfter = activateAfter;
        this.state = start;
        this.active = activateAfter < 0;
    }

    /** Whether tokens are being masked (false while the model still reasons). */
    public boolean active() {
        return active;
    }

    /** Whether the text so far is complete (an end of sequence is allowed). */
    public boolean complete() {
        return !active || state.accepting();
    }

    /** Computes the mask of the current state, if not done yet; safe on any one thread at a time. */
    public void prepare() {
        if (!active || preparedFor == state) {
            return;
        }
        TokenTrie trie = texts.trie();
        int words = (trie.tokens() + 63) >>> 6;
        if (allowed == null || allowed.length != words) {
            allowed = new long[words];
        } else {
            Arrays.fill(allowed, 0);
        }
        allowedCount = trie.walk(state, allowed);
        preparedFor = state;
    }

    /** Masks {@code logits} in place; returns the number of tokens left allowed. */
    public int mask(float[] logits) {
        if (!active) {
            return logits.length;
        }
        prepare();
        TokenTrie trie = texts.trie();
        boolean done = state.accepting();
        float[] eosLogits = new float[eos.length];
        for (int i = 0; i < eos.length; i++) {
            eosLogits[i] = eos[i] < logits.length ? logits[eos[i]] : 0;
        }
        int n = trie.tokens();
        if (allowedCount * 4 < n) { // few allowed: keep those, clear the rest
            int[] keepIds = new int[allowedCount];
            float[] keep = new float[allowedCount];
            int k = 0;
            for (int w = 0; w < allowed.length; w++) {
                for (long bits = allowed[w]; bits != 0; bits &= bits - 1) {
                    int id = trie.tokenAt((w << 6) + Long.numberOfTrailingZeros(bits));
                    keepIds[k] = id;
                    keep[k++] = id < logits.length ? logits[id] : 0;
                }
            }
            Arrays.fill(logits, Float.NEGATIVE_INFINITY);
            for (int i = 0; i < k; i++) {
                if (keepIds[i] < logits.length) {
                    logits[keepIds[i]] = keep[i];
                }
            }
        } else {
            for (int w = 0; w < allowed.length; w++) {
                long bits = allowed[w];
                if (bits == -1L) {
                    continue;
                }
                int base = w << 6, top = Math.min(64, n - base);
                for (int b = 0; b < top; b++) {
                    if ((bits & (1L << b)) == 0) {
                        int id = trie.tokenAt(base + b);
                        if (id < logits.length) {
                            logits[id] = Float.NEGATIVE_INFINITY;
                        }
                    }
                }
            }
            for (int id : trie.untexted()) {
                if (id < logits.length) {
                    logits[id] = Float.NEGATIVE_INFINITY;
                }
            }
            for (int id = trie.vocabSize(); id < logits.length; id++) {
                logits[id] = Float.NEGATIVE_INFINITY;
            }
        }
        int count = allowedCount;
        for (int i = 0; i < eos.length; i++) {
            int id = eos[i];
            if (id < logits.length) {
                boolean wasAllowed = logits[id] != Float.NEGATIVE_INFINITY;
                logits[id] = done ? eosLogits[i] : Float.NEGATIVE_INFINITY;
                count += (done ? 1 : 0) - (wasAllowed ? 1 : 0);
            }
        }
        if (count <= 0) { // nothing fits (cannot happen for a satisfiable grammar): let the sequence end
            for (int id : eos) {
                if (id < logits.length) {
                    logits[id] = 0;
                }
            }
        }
        return Math.max(count, 0);
    }

    /** Advances past the sampled token. */
    public void accept(int token) {
        if (!active) {
            active = token == activateAfter;
            return;
        }
        if (Arrays.binarySearch(eos, token) >= 0) {
            return;
        }
        String t = token < texts.size() ? texts.text(token) : null;
        Recognizer next = t == null ? null : state.feed(t);
        if (next != null) {
            state = next;
        }
    }
}

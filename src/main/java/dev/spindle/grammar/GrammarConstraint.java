package dev.spindle.grammar;

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
 * text whole subtrees without the characters that matter there are accepted without stepping.
 * Masks are kept by state (the last {@value #CACHED_MASKS}), as token-id lists of the smaller
 * side. {@link #prepare} computes it ahead (on any thread, e.g. while the forward pass runs);
 * {@link #mask} applies it.
 */
public final class GrammarConstraint {
    /** Masks kept per sequence, by state: inside a string or free text the state repeats from step to step. */
    static final int CACHED_MASKS = 32;

    /**
     * A state's mask as token ids: those allowed when few are, else those refused (tokens
     * without text, and ids past the vocabulary, are refused either way).
     */
    record Mask(int[] ids, boolean allowList, int allowed) {
    }

    private final TokenTexts texts;
    private final int[] eos;
    private final int activateAfter;
    private Recognizer state;
    private boolean active;
    private Mask prepared;        // the mask of {@code preparedFor}
    private Recognizer preparedFor;
    private long[] bits;          // scratch: sorted-order bits of the trie walk
    private final java.util.LinkedHashMap<Recognizer, Mask> cache = new java.util.LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(java.util.Map.Entry<Recognizer, Mask> eldest) {
            return size() > CACHED_MASKS;
        }
    };

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

    /**
     * Whether this step needs no mask: not active yet, or in free text the grammar only watches
     * (a lazy tool-call grammar before {@code <tool_call>}; the token's text still advances it).
     */
    public boolean unmasked() {
        return !active || state.freeText();
    }

    /** Computes the mask of the current state, if not done yet; safe on any one thread at a time. */
    public void prepare() {
        if (unmasked() || preparedFor == state) {
            return;
        }
        Recognizer key = state.maskEquivalent(texts.trie().longest()); // e.g. a bounded string far from its bound: the unbounded one's mask
        Mask m = cache.get(key);
        if (m == null) {
            m = compute(key);
            cache.put(key, m);
        }
        prepared = m;
        preparedFor = state;
    }

    private Mask compute(Recognizer s) {
        TokenTrie trie = texts.trie();
        int n = trie.tokens();
        int words = (n + 63) >>> 6;
        if (bits == null || bits.length != words) {
            bits = new long[words];
        } else {
            Arrays.fill(bits, 0);
        }
        int allowed = trie.walk(s, bits);
        boolean allowList = allowed * 2 <= n;
        int[] ids = new int[allowList ? allowed : n - allowed];
        int k = 0;
        for (int w = 0; w < words; w++) {
            long b = allowList ? bits[w] : ~bits[w];
            if (!allowList && w == words - 1 && (n & 63) != 0) {
                b &= -1L >>> (64 - (n & 63)); // no bits past the last token
            }
            for (; b != 0; b &= b - 1) {
                ids[k++] = trie.tokenAt((w << 6) + Long.numberOfTrailingZeros(b));
            }
        }
        return new Mask(ids, allowList, allowed);
    }

    /** Masks {@code logits} in place; returns the number of tokens left allowed. */
    public int mask(float[] logits) {
        if (unmasked()) {
            return logits.length;
        }
        prepare();
        TokenTrie trie = texts.trie();
        Mask m = prepared;
        boolean done = state.accepting();
        float[] eosLogits = new float[eos.length];
        for (int i = 0; i < eos.length; i++) {
            eosLogits[i] = eos[i] < logits.length ? logits[eos[i]] : 0;
        }
        if (m.allowList()) { // few allowed: keep those, clear the rest
            float[] keep = new float[m.ids().length];
            for (int i = 0; i < keep.length; i++) {
                int id = m.ids()[i];
                keep[i] = id < logits.length ? logits[id] : 0;
            }
            Arrays.fill(logits, Float.NEGATIVE_INFINITY);
            for (int i = 0; i < keep.length; i++) {
                int id = m.ids()[i];
                if (id < logits.length) {
                    logits[id] = keep[i];
                }
            }
        } else {
            for (int id : m.ids()) {
                if (id < logits.length) {
                    logits[id] = Float.NEGATIVE_INFINITY;
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
        int count = m.allowed();
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

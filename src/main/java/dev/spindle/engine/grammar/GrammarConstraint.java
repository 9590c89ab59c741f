package dev.spindle.engine.grammar;

import java.util.Set;

/**
 * Constrained decoding for one sequence: before each sample, tokens whose text would
 * leave the language (a JSON schema's documents, or tool calls) are masked (their logit set to -infinity); end-of-
 * sequence ids are allowed only once the document is complete. While the model is still
 * reasoning (before {@code activateAfter} is generated), nothing is masked.
 */
public final class GrammarConstraint {
    private final TokenTexts texts;
    private final Set<Integer> eos;
    private final int activateAfter;
    private Recognizer state;
    private boolean active;

    /**
     * @param activateAfter token id after which the constraint starts (e.g. {@code </think>}), or -1 to start at once
     */
    public GrammarConstraint(Schema schema, TokenTexts texts, Set<Integer> eos, int activateAfter) {
        this(JsonRecognizer.start(schema), texts, eos, activateAfter);
    }

    public GrammarConstraint(Recognizer start, TokenTexts texts, Set<Integer> eos, int activateAfter) {
        this.texts = texts;
        this.eos = Set.copyOf(eos);
        this.activateAfter = activateAfter;
        this.state = start;
        this.active = activateAfter < 0;
    }

    /** Masks {@code logits} in place; returns the number of tokens left allowed. */
    public int mask(float[] logits) {
        if (!active) {
            return logits.length;
        }
        boolean done = state.accepting();
        int allowed = 0;
        for (int id = 0; id < logits.length; id++) {
            boolean ok;
            if (eos.contains(id)) {
                ok = done;
            } else {
                String t = id < texts.size() ? texts.text(id) : null;
                ok = t != null && !t.isEmpty() && state.feed(t) != null;
            }
            if (ok) {
                allowed++;
            } else {
                logits[id] = Float.NEGATIVE_INFINITY;
            }
        }
        if (allowed == 0) { // nothing fits (cannot happen for a satisfiable schema): let the sequence end
            for (int id : eos) {
                if (id < logits.length) {
                    logits[id] = 0;
                }
            }
        }
        return allowed;
    }

    /** Advances past the sampled token. */
    public void accept(int token) {
        if (!active) {
            active = token == activateAfter;
            return;
        }
        if (eos.contains(token)) {
            return;
        }
        String t = token < texts.size() ? texts.text(token) : null;
        Recognizer next = t == null ? null : state.feed(t);
        if (next != null) {
            state = next;
        }
    }
}

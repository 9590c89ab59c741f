package dev.spindle.engine.spec;

import java.nio.file.Path;
import java.util.Locale;

/**
 * Speculative decoding as configured ({@code --speculative-method}, {@code spindle.speculative.*}).
 *
 * @param method     none, draft (a draft model) or ngram (prompt lookup)
 * @param draftModel the draft model's directory (method draft)
 * @param numTokens  drafts per step at most (k)
 * @param ngramMin   prompt lookup: shortest suffix matched
 * @param ngramMax   prompt lookup: longest suffix matched
 * @param maxBatch   drafting stops while more sequences than this decode in one step
 */
public record SpeculativeConfig(Method method, Path draftModel, int numTokens, int ngramMin, int ngramMax, int maxBatch) {
    public static final SpeculativeConfig NONE = new SpeculativeConfig(Method.NONE, null, 4, 1, 4, 16);

    public enum Method {
        NONE, DRAFT, NGRAM;

        public static Method parse(String s) {
            try {
                return valueOf(s.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("speculative method: expected none, draft or ngram, got \"" + s + "\"");
            }
        }
    }

    public SpeculativeConfig {
        if (method == Method.DRAFT && draftModel == null) {
            throw new IllegalArgumentException("--speculative-method draft needs --draft-model DIR (spindle.speculative.draft-model)");
        }
        if (method != Method.NONE && (numTokens < 1 || numTokens > 64)) {
            throw new IllegalArgumentException("--num-speculative-tokens must be in [1, 64], got " + numTokens);
        }
        if (method == Method.NGRAM && (ngramMin < 1 || ngramMax < ngramMin)) {
            throw new IllegalArgumentException("prompt lookup needs 1 <= --prompt-lookup-min <= --prompt-lookup-max, got " + ngramMin + ", " + ngramMax);
        }
        if (method != Method.NONE && maxBatch < 1) {
            throw new IllegalArgumentException("--speculative-max-batch must be >= 1, got " + maxBatch);
        }
    }

    public String describe() {
        return switch (method) {
            case NONE -> "off";
            case DRAFT -> "draft model " + draftModel + ", up to " + numTokens + " tokens a step while at most " + maxBatch + " sequences decode";
            case NGRAM -> "prompt lookup (n " + ngramMin + ".." + ngramMax + "), up to " + numTokens + " tokens a step while at most " + maxBatch
                    + " sequences decode";
        };
    }
}

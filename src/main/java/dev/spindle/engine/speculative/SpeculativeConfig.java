package dev.spindle.engine.speculative;

import java.nio.file.Path;
import java.util.Locale;

/**
 * Speculative decoding as configured ({@code --speculative-method}, {@code spindle.speculative.*}).
 *
 * @param method     none, draft (a draft model), ngram (prompt lookup) or dflash (a DFlash / DFlash2 head)
 * @param draftModel the draft model's directory (method draft), or the head's (method dflash)
 * @param numTokens  drafts per step at most (k)
 * @param ngramMin   prompt lookup: shortest suffix matched
 * @param ngramMax   prompt lookup: longest suffix matched
 * @param maxBatch   drafting stops while more sequences than this decode in one step
 * @param tapOffset  dflash: which residual a target_layer_id names: 1 (the paper's and HF's hidden_states[id + 1], the output of
 *                   layer id), or 2 (one layer deeper, as exllamav3 reads some checkpoints)
 * @param blockSize  dflash: rows of a draft block (0: the head's block_size); drafts per step are at most block - 1
 * @param sampledDrafts dflash, at temperature &gt; 0: draw the drafts from the head's distribution (DFlash: each row's softmax;
 *                   DFlash2: the sampled selector walk) and verify them against that q on the host; false (the default):
 *                   deterministic drafts (DFlash's argmax, DFlash2's greedy walk), whose rows the device draws by plain
 *                   sampling's rule
 */
public record SpeculativeConfig(Method method, Path draftModel, int numTokens, int ngramMin, int ngramMax, int maxBatch, int tapOffset,
                                int blockSize, boolean sampledDrafts, HeadWeights headWeights) {
    public static final SpeculativeConfig NONE = new SpeculativeConfig(Method.NONE, null, 4, 1, 4, 16, 1, 0, false);

    /** As published (bf16 head weights). */
    public SpeculativeConfig(Method method, Path draftModel, int numTokens, int ngramMin, int ngramMax, int maxBatch, int tapOffset,
                             int blockSize, boolean sampledDrafts) {
        this(method, draftModel, numTokens, ngramMin, ngramMax, maxBatch, tapOffset, blockSize, sampledDrafts, HeadWeights.AS_STORED);
    }

    /**
     * How a DFlash head's linear layers are held: as stored, or packed at load to 4-bit affine codes (MLX's layout, groups of
     * 64 columns, a bf16 scale and bias each: 4.5 bits a weight), lossy and opt-in, as a CUDA port of the 33B packs its
     * DFlash2 head for small cards.
     */
    public enum HeadWeights {
        AS_STORED("none"), AFFINE4("affine4");

        public final String label;

        HeadWeights(String label) {
            this.label = label;
        }

        public static HeadWeights parse(String s) {
            for (HeadWeights h : values()) {
                if (h.label.equals(s.trim().toLowerCase(Locale.ROOT))) {
                    return h;
                }
            }
            throw new IllegalArgumentException("--dflash-head-quantization: expected none or affine4, got \"" + s + "\"");
        }
    }

    /** Without DFlash options (the paper's tap offset, the head's block size, deterministic drafts). */
    public SpeculativeConfig(Method method, Path draftModel, int numTokens, int ngramMin, int ngramMax, int maxBatch) {
        this(method, draftModel, numTokens, ngramMin, ngramMax, maxBatch, 1, 0, false);
    }

    public enum Method {
        NONE, DRAFT, NGRAM, DFLASH;

        public static Method parse(String s) {
            try {
                return valueOf(s.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("speculative method: expected none, draft, ngram or dflash, got \"" + s + "\"");
            }
        }
    }

    public SpeculativeConfig {
        if ((method == Method.DRAFT || method == Method.DFLASH) && draftModel == null) {
            throw new IllegalArgumentException("--speculative-method " + method.name().toLowerCase(Locale.ROOT)
                    + " needs --draft-model DIR (spindle.speculative.draft-model)");
        }
        if (tapOffset != 1 && tapOffset != 2) {
            throw new IllegalArgumentException("--dflash-tap-offset must be 1 (hidden_states[id + 1], the paper's) or 2 (one layer deeper), got " + tapOffset);
        }
        if (blockSize != 0 && blockSize < 2) {
            throw new IllegalArgumentException("--dflash-block-size must be 0 (the head's) or at least 2, got " + blockSize);
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
            case DFLASH -> "DFlash head " + draftModel + " (tap offset " + tapOffset + (blockSize > 0 ? ", block " + blockSize : "") + (sampledDrafts ? ", sampled drafts" : "") + "), up to "
                    + numTokens + " tokens a step while at most " + maxBatch + " sequences decode";
        };
    }
}

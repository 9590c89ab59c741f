package dev.spindle.model;

import java.util.Locale;

/**
 * How the linear layers' weights are served ({@code --quantization}): as the checkpoint stores them ({@link #NONE}), or
 * quantized at load from a bf16 release. The embedding, the norms and the output head stay bf16 (as vLLM's fp8 leaves
 * the head). Every lossy choice is disclosed with its KL against the bf16 release ({@code spindle kl}).
 */
public enum Quantization {
    /** The checkpoint's own format (the bf16 release as published, or an fp8 checkpoint as its publisher scaled it). */
    NONE("none", 0, 0),
    /** fp8 E4M3 with one fp32 scale per output row (amax / 448), compressed-tensors' channel layout. */
    FP8_ROW("fp8-row", 1, Integer.MAX_VALUE),
    /**
     * fp8 E4M3 with one fp32 scale per 128 x 128 block (the layout of DeepSeek's and Qwen's fp8 releases): what {@code fp8}
     * means, chosen by measured KL (lower than per-row scales on every category of the shipped corpus: docs/KL.md).
     */
    FP8_BLOCK("fp8-block", 128, 128);

    /** The name {@code --quantization} takes. */
    public final String label;
    final int blockRows, blockCols;

    Quantization(String label, int blockRows, int blockCols) {
        this.label = label;
        this.blockRows = blockRows;
        this.blockCols = blockCols;
    }

    /** Rows of one scale block (1: a scale per output row). */
    public int blockRows() {
        return blockRows;
    }

    /** Columns of one scale block in a matrix of {@code cols} columns (all of them: a scale per row). */
    public int blockCols(int cols) {
        return Math.min(blockCols, cols);
    }

    /** {@code none}, {@code fp8} (= {@link #FP8_BLOCK}), {@code fp8-row} or {@code fp8-block}. */
    public static Quantization parse(String s) {
        String v = s == null ? "none" : s.trim().toLowerCase(Locale.ROOT);
        if (v.equals("fp8")) {
            return FP8_BLOCK;
        }
        for (Quantization q : values()) {
            if (q.label.equals(v)) {
                return q;
            }
        }
        throw new IllegalArgumentException("quantization: expected none, fp8, fp8-row or fp8-block, got \"" + s + "\"");
    }
}

package dev.spindle.backend.cuda;

import java.util.List;

/**
 * A linear_rows kernel (sm_90a): up to 8 {@code tiles} rows, stages of {@code boxes} 64-key boxes,
 * {@code stages} stages in flight, {@code weightRows} weight rows (outputs) a CTA: 64, or 16 or 32 for more
 * CTAs on a narrow weight (linear_rows.cu's table). {@code mma}: an fp8-only kernel on mma.sync, one warp a CTA and 16
 * weight rows, the codes straight from the stage into the MMA's registers (linear_rows_fp8_mma.cu's table, {@link #FP8_MMA}).
 */
public record LinearRowsVariant(int tiles, int boxes, int stages, int weightRows, boolean mma) {
    public LinearRowsVariant(int tiles, int boxes, int stages) {
        this(tiles, boxes, stages, 64);
    }

    public LinearRowsVariant(int tiles, int boxes, int stages, int weightRows) {
        this(tiles, boxes, stages, weightRows, false);
    }

    /** An fp8 mma.sync variant (16 weight rows). */
    static LinearRowsVariant fp8Mma(int tiles, int boxes, int stages) {
        return new LinearRowsVariant(tiles, boxes, stages, 16, true);
    }

    public int rows() {
        return 8 * tiles;
    }

    /** Keys a stage: k must be a multiple. */
    public int keys() {
        return 64 * boxes;
    }

    String kernel() {
        if (mma) {
            throw new IllegalStateException("the mma.sync variants are fp8 kernels only: " + fp8Kernel());
        }
        return "linear_rows_n" + tiles + "_b" + boxes + "_s" + stages + (weightRows == 64 ? "" : "_r" + weightRows);
    }

    /** Its fp8 twin (linear_rows.cu): the weights read as fp8 codes and expanded in shared memory. */
    String fp8Kernel() {
        if (mma) {
            return "linear_rows_fp8_mma_n" + tiles + "_b" + boxes + "_s" + stages;
        }
        return "linear_rows_fp8" + kernel().substring("linear_rows".length());
    }

    /** Threads a CTA: a warpgroup for the wgmma kernels, a warp for the mma.sync ones. */
    int threads() {
        return mma ? 32 : 128;
    }

    /**
     * The fp8 twin's shared memory: a box's weights are 64 bytes a row as loaded, and two stages' boxes expanded to bf16; an
     * mma variant's stages only (16 rows of 64 codes, 8 NT rows of 64 keys bf16 a box).
     */
    int fp8SharedBytes() {
        if (mma) {
            return stages * boxes * (1024 + 1024 * tiles) + 1024 + 8 * stages;
        }
        return stages * boxes * (64 * weightRows + 1024 * tiles) + 2 * boxes * 128 * weightRows + 128 * (64 - weightRows) + 1024 + 8 * stages;
    }

    /** Whether linear_rows.cu defines its paired twin: the 64-row variants of one row tile (up to 8 rows). */
    public boolean hasPairedTwin() {
        return weightRows == 64 && tiles == 1;
    }

    /** The paired twin (linear_rows.cu): the same weight stream, an epilogue ({@link PairedEpilogue}). */
    String pairedKernel() {
        if (!hasPairedTwin()) {
            throw new IllegalStateException(kernel() + " has no paired twin (64 weight rows a CTA, one row tile, only)");
        }
        return "linear_rows_paired_n" + tiles + "_b" + boxes + "_s" + stages;
    }

    /** How the backend's choices name it: boxes, stages, and weight rows where not 64. */
    public String label() {
        return (mma ? "mma " : "") + "b" + boxes + " s" + stages + (weightRows == 64 ? "" : " r" + weightRows);
    }

    /**
     * STAGES x BOXES x (weight rows + 8 NT rows of x) x 64 keys bf16, the last box's overread by the 64-row
     * wgmma, 1024 for alignment, 8 per stage's mbarrier.
     */
    int sharedBytes() {
        return stages * boxes * (128 * weightRows + 1024 * tiles) + 128 * (64 - weightRows) + 1024 + 8 * stages;
    }

    /** linear_rows.cu's variants, in its order. */
    static final List<LinearRowsVariant> ALL = List.of(
            new LinearRowsVariant(1, 1, 8), new LinearRowsVariant(1, 2, 6), new LinearRowsVariant(1, 2, 8), new LinearRowsVariant(1, 4, 4),
            new LinearRowsVariant(2, 1, 8), new LinearRowsVariant(2, 2, 6), new LinearRowsVariant(4, 1, 8), new LinearRowsVariant(4, 2, 6),
            new LinearRowsVariant(8, 1, 6), new LinearRowsVariant(8, 2, 4), new LinearRowsVariant(1, 4, 8, 16), new LinearRowsVariant(1, 2, 8, 32),
            new LinearRowsVariant(2, 4, 6, 16), new LinearRowsVariant(4, 2, 8, 16));

    /** linear_rows_fp8_mma.cu's variants, in its order. */
    static final List<LinearRowsVariant> FP8_MMA = List.of(fp8Mma(1, 1, 8), fp8Mma(1, 2, 8), fp8Mma(1, 2, 12), fp8Mma(1, 4, 6),
            fp8Mma(2, 2, 8), fp8Mma(4, 1, 8), fp8Mma(4, 2, 6));
}

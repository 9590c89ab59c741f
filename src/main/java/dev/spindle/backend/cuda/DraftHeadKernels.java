package dev.spindle.backend.cuda;

import java.lang.foreign.MemorySegment;

/**
 * The DFlash / DFlash2 heads' own kernels (draft_head.cu): the injected rows' gather and their K and V scattered after each
 * sequence's context, the heads' attention and grouped dynamic convolution, the logits' shaping, and DFlash2's candidate
 * walk with its top-k first pass. The heads' other ops are the target's kernels ({@link CudaKernels}).
 */
public final class DraftHeadKernels {
    private final CudaDriver cuda;
    private final MemorySegment draftAttention, dynConv, shapeLogits, selectorWalk, scatterKv, gatherTaps, rowTopK;

    DraftHeadKernels(CudaDriver cuda, MemorySegment module) {
        this.cuda = cuda;
        draftAttention = cuda.function(module, "draft_attention");
        dynConv = cuda.function(module, "dyn_conv");
        shapeLogits = cuda.function(module, "shape_logits");
        selectorWalk = cuda.function(module, "selector_walk");
        scatterKv = cuda.function(module, "scatter_kv");
        gatherTaps = cuda.function(module, "gather_taps");
        rowTopK = cuda.function(module, "row_topk");
    }

    /**
     * A draft head's injected rows from its target's tap buffer ([taps][stepRows][hidden] bf16): row r of feat
     * ([rows][taps x hidden]) is the buffer's row rowIdx[r] of every tap in turn (draft_head.cu).
     */
    public void gatherTaps(long tapBuf, int stepRows, int hidden, int taps, long rowIdx, long feat, int rows) {
        cuda.launch(gatherTaps, rows, taps, 128, tapBuf, stepRows, hidden, taps, rowIdx, feat, rows);
    }

    /**
     * Row r of k and of v (width bf16 each, a multiple of 8) to the device addresses kAddr[r] and vAddr[r]
     * (rows 64-bit addresses each): a draft head's injected rows after each one's own context (draft_head.cu).
     */
    public void scatterKv(long k, long v, int width, long kAddr, long vAddr, int rows) {
        cuda.launch(scatterKv, rows, 2, 128, k, v, width, kAddr, vAddr, rows);
    }

    /** The largest top-k and rank {@link #selectorWalk} takes (draft_head.cu's SW_MAX_K, SW_MAX_RANK). */
    public static final int SELECTOR_WALK_MAX_K = 32, SELECTOR_WALK_MAX_RANK = 1024;

    /**
     * DFlash2's greedy candidate walk over one block's {@code rows} drafted rows (draft_head.cu): logits (rows, vocab)
     * and proj (rows, rank) bf16, the codebooks (vocab, rank) bf16, the anchor token; the drafts to out (rows ints).
     * The bits of {@code CandidateSelector.walk} at temperature 0. One CTA of 1024 threads.
     */
    public void selectorWalk(long logits, int rows, int vocab, long proj, int rank, int k, long pred, long succ, int anchor, long out) {
        selectorWalk(logits, rows, vocab, proj, rank, k, pred, succ, anchor, out, 0, 0, 0, 0, 0);
    }

    /** Parts of each row's vocabulary the first pass of a walk's top-k splits it into (parts x k fits the walk's block). */
    public static int topKParts(int k, int vocab) {
        return Math.max(1, Math.min(Math.min(128, 1024 / k), vocab));
    }

    /** Bytes of the parts' candidates of {@code rows} rows (topKParts x k values and ids a row). */
    public static long topKPartBytes(int rows, int k, int vocab) {
        return 8L * rows * topKParts(k, vocab) * k;
    }

    /**
     * The first pass of the walk's top-k over {@code rows} rows at once (draft_head.cu's row_topk: a CTA per row and
     * part of its vocabulary), into parts (topKPartBytes): the rows' walks then read their candidates from it.
     */
    public void rowTopK(long logits, int rows, int vocab, int k, long parts) {
        int p = topKParts(k, vocab);
        cuda.launch(rowTopK, rows, p, 256, logits, vocab, k, parts, parts + 4L * rows * p * k);
    }

    /**
     * The walk sampled at {@code temperature} (uniforms: one double a row, the draws the host walk would take from its
     * generator), or greedy where uniforms is 0: each row's draft to out, its k candidates' q to qOut and their ids to
     * candOut (rows x k each). The host walk's scores and draw rule; q from the device's double exp (draft_head.cu).
     */
    public void selectorWalk(long logits, int rows, int vocab, long proj, int rank, int k, long pred, long succ, int anchor, long out, long uniforms,
                             double temperature, long qOut, long candOut) {
        selectorWalk(logits, rows, vocab, proj, rank, k, pred, succ, anchor, out, uniforms, temperature, qOut, candOut, 0);
    }

    /**
     * As above, with each row's candidates from rowTopK's parts (their rows from {@code parts}, laid out for
     * {@code partRows} rows in all; 0: the walk scans each row's vocabulary itself). The same candidates either way.
     */
    public void selectorWalk(long logits, int rows, int vocab, long proj, int rank, int k, long pred, long succ, int anchor, long out, long uniforms,
                             double temperature, long qOut, long candOut, long parts) {
        selectorWalk(logits, rows, vocab, proj, rank, k, pred, succ, anchor, out, uniforms, temperature, qOut, candOut, parts, rows, 0);
    }

    /** The walk of rows firstRow.. of rowTopK's parts laid out for partRows rows. */
    public void selectorWalk(long logits, int rows, int vocab, long proj, int rank, int k, long pred, long succ, int anchor, long out, long uniforms,
                             double temperature, long qOut, long candOut, long parts, int partRows, int firstRow) {
        if (k < 1 || k > SELECTOR_WALK_MAX_K || rank < 1 || rank > SELECTOR_WALK_MAX_RANK) {
            throw new IllegalArgumentException("selector_walk takes top-k 1.." + SELECTOR_WALK_MAX_K + " and rank 1.." + SELECTOR_WALK_MAX_RANK
                    + ", not " + k + " and " + rank);
        }
        int p = topKParts(k, vocab);
        long values = parts == 0 ? 0 : parts + 4L * firstRow * p * k, ids = parts == 0 ? 0 : parts + 4L * partRows * p * k + 4L * firstRow * p * k;
        cuda.launch(selectorWalk, 1, 1, 1024, logits, rows, vocab, proj, rank, k, pred, succ, anchor, out, uniforms, temperature, qOut, candOut,
                values, ids, parts == 0 ? 0 : p);
    }

    /** Warps of a draft_attention CTA (draft_head.cu's DA_WARPS). */
    static final int DRAFT_ATTENTION_WARPS = 8;

    /**
     * A draft head's blocks (several sequences' at once) against their contexts (draft_head.cu): q (rows, heads x d),
     * ctxKV the layer's context K and V addresses per sequence (2 per sequence), seqs {ctxRows, ctxStart, position,
     * row0, rows} per sequence, rowSeq each row's sequence, blkK / blkV the blocks' own keys and values (rows, kvHeads x d).
     */
    public void draftAttention(long q, long ctxKV, long seqs, long rowSeq, long blkK, long blkV, long out, int rows, int heads, int kvHeads, int headDim,
                               int window) {
        cuda.launch(draftAttention, rows, heads, 32 * DRAFT_ATTENTION_WARPS, q, ctxKV, seqs, rowSeq, blkK, blkV, out, rows, heads, kvHeads, headDim, window);
    }

    /** DFlash2's grouped dynamic convolution over each block's rows (inBlock: each row's index in its block; draft_head.cu). */
    public void dynConv(long x, long dyn, int dynStride, int dynOffset, long base, long out, long inBlock, int rows, int hidden, int groupSize, int taps) {
        cuda.launch(dynConv, rows, (hidden + 255) / 256, 256, x, dyn, dynStride, dynOffset, base, out, inBlock, rows, hidden, groupSize, taps);
    }

    /** A draft head's logits times its output multiplier, then soft-capped (draft_head.cu). */
    public void shapeLogits(long z, long n, float multiplier, float softcap) {
        cuda.launch(shapeLogits, CudaKernels.grid(n), 1, 256, z, n, multiplier, softcap);
    }
}

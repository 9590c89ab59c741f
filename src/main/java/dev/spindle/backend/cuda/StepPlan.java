package dev.spindle.backend.cuda;

import dev.spindle.backend.KeySplits;
import dev.spindle.step.BlockIds;
import dev.spindle.step.ModelStep.Window;

import java.util.List;

/**
 * The integers one GPU forward step needs, built on the host and sent in one copy: token
 * ids, positions, each row's KV slot, the windows' block tables, the attention CTA
 * descriptors (see attention.cu), the decode rows' combine descriptors and the rows whose
 * logits are wanted. Each row of a short window (decode rows, drafted windows being verified: {@link #rowwise})
 * gets CTAs that each walk a run of its KV splits (flash-decoding; KeySplits), writing every split's state (or, in a step
 * of many rows, one CTA that folds them all: {@link #folds}); longer windows get tiles of rows that walk every split themselves.
 * Either way each row's arithmetic is the same.
 */
final class StepPlan {
    final int rows;
    final int[] data;
    final int tokens, positions, slotMap, tables, desc, cdesc, gather;
    final int ctas, decodeCtas, decodeRows, partials, logitRows, maxPosition, keysPerCta;
    /** The most split slots of a decode row the merge folds (0: every row folds its splits in its CTA); picks the merge kernel. */
    final int mergeSplits;
    final int[] logitCounts;
    /** Windows whose first token the feed_tokens kernel writes from the previous step's draws, and where their pairs are. */
    final int feeds, feedAt;
    /** Decode CTAs a step aims at: eight per SM of a 132-SM GPU (why: docs/bench/CHOICES.md). */
    static final int DECODE_CTAS = 1056;
    /** The prefill attention kernel the step's prefill CTAs run (CudaForwardPass.prefillKernel). */
    int prefillKernel = AttentionKernels.PREFILL;
    /** Set when a captured graph already ran the lm head (and, for greedy, the argmax) over all logit rows. */
    boolean headDone;

    StepPlan(List<Window> windows, int group, int kvHeads) {
        this(windows, group, kvHeads, 0);
    }

    StepPlan(List<Window> windows, int group, int kvHeads, int fixedSplits) {
        this(windows, group, kvHeads, fixedSplits, AttentionKernels.ATTENTION_TILE);
    }

    /**
     * @param fixedSplits 0: as many split CTAs as each decode row needs; else (decode steps only, for a
     *                    captured CUDA graph) exactly this many per row, the unused ones empty, so the
     *                    launches and every offset depend only on the batch size and this number
     * @param tileMmaRows MMA rows of a prefill CTA ({@link AttentionKernels#attentionTileRows} of the prefill kernel the
     *                    step runs): its window rows are this over {@code group}
     */
    StepPlan(List<Window> windows, int group, int kvHeads, int fixedSplits, int tileMmaRows) {
        this(windows, group, kvHeads, fixedSplits, tileMmaRows, new int[0]);
    }

    /**
     * @param fed empty, or per window -1 or the previous step's logit row whose drawn token is the window's first
     *            ({@link dev.spindle.step.ModelStep#fed}): pairs (token slot, row) for the feed_tokens kernel at {@link #feedAt}
     */
    StepPlan(List<Window> windows, int group, int kvHeads, int fixedSplits, int tileMmaRows, int[] fed) {
        int n = 0, tableInts = 0, ctaCount = 0, dRows = 0, parts = 0, lRows = 0, maxPos = 0;
        long slotKeys = 0;
        int tileRows = Math.max(1, tileMmaRows / group);
        for (Window w : windows) {
            int len = w.tokens().length, start = w.start();
            n += len;
            tableInts += w.table().numBlocks();
            maxPos = Math.max(maxPos, start + len - 1);
            if (rowwise(len)) {
                for (int r = 0; r < len; r++) {
                    slotKeys += KeySplits.start(slotsOf(start + r, fixedSplits));
                }
                dRows += len;
            } else {
                ctaCount += (len + tileRows - 1) / tileRows;
            }
            lRows += w.logitRows().length;
        }
        // a decode CTA walks a run of splits (each split's state still written on its own) of about keysPerCta keys:
        // about eight CTAs per SM of an H100-class GPU across the KV heads (DECODE_CTAS); whole 128-key units, so that
        // below 16K keys a CTA walks whole splits
        keysPerCta = (int) Math.max(KeySplits.MIN, Math.ceilDiv(slotKeys * kvHeads, (long) DECODE_CTAS * KeySplits.MIN) * KeySplits.MIN);
        foldRows = (long) dRows * kvHeads >= FOLD_MIN_CTAS;
        int dCtas = 0, mergeMost = 0;
        for (Window w : windows) {
            if (rowwise(w.tokens().length)) {
                for (int r = 0; r < w.tokens().length; r++) {
                    int slots = slotsOf(w.start() + r, fixedSplits), ctas = ctasOfRow(slots);
                    boolean folds = folds(ctas);
                    dCtas += folds ? 1 : ctas;
                    parts += folds ? 0 : slots;
                    mergeMost = folds ? mergeMost : Math.max(mergeMost, slots);
                }
            }
        }
        ctaCount += dCtas;
        rows = n;
        ctas = ctaCount;
        decodeCtas = dCtas;
        decodeRows = dRows;
        partials = parts;
        mergeSplits = mergeMost;
        logitRows = lRows;
        maxPosition = maxPos;
        tokens = 0;
        positions = n;
        slotMap = 2 * n;
        desc = 3 * n;
        cdesc = desc + 8 * ctaCount;
        gather = cdesc + 3 * dRows;
        tables = gather + lRows;
        int feedPairs = 0;
        for (int f : fed) {
            feedPairs += f >= 0 ? 1 : 0;
        }
        feeds = feedPairs;
        feedAt = tables + tableInts;
        data = new int[feedAt + 2 * feedPairs];
        logitCounts = new int[windows.size()];
        int row = 0, tab = tables, d = desc, cd = cdesc, part = 0, g = gather, drow = 0, f = 0;
        int[] tabOffs = new int[windows.size()], rowOf = new int[windows.size()];
        for (int wi = 0; wi < windows.size(); wi++) {
            Window w = windows.get(wi);
            BlockIds t = w.table();
            int len = w.tokens().length, start = w.start(), bs = t.blockSize();
            tabOffs[wi] = tab - tables;
            rowOf[wi] = row;
            for (int b = 0; b < t.numBlocks(); b++) {
                data[tab++] = t.block(b);
            }
            for (int r = 0; r < len; r++) {
                int pos = start + r;
                data[tokens + row + r] = w.tokens()[r];
                data[positions + row + r] = pos;
                data[slotMap + row + r] = t.block(pos / bs) * bs + pos % bs;
            }
            for (int r : w.logitRows()) {
                data[g++] = row + r;
            }
            logitCounts[wi] = w.logitRows().length;
            if (fed.length > 0 && fed[wi] >= 0) {
                data[feedAt + 2 * f] = tokens + row;
                data[feedAt + 2 * f + 1] = fed[wi];
                f++;
            }
            row += len;
        }
        // decode rows first (one CTA per split, phases 1 and 2), then the windows' row tiles (phase 0)
        for (int wi = 0; wi < windows.size(); wi++) {
            Window w = windows.get(wi);
            if (!rowwise(w.tokens().length)) {
                continue;
            }
            for (int r = 0; r < w.tokens().length; r++) {
                int start = w.start() + r, splits = KeySplits.count(start + 1), at = rowOf[wi] + r;
                if (fixedSplits > 0 && splits > fixedSplits) {
                    throw new IllegalArgumentException(splits + " splits exceed the plan's " + fixedSplits);
                }
                int slotsOfRow = slotsOf(start, fixedSplits), ctasOfRow = ctasOfRow(slotsOfRow);
                boolean folds = folds(ctasOfRow);
                data[cd++] = part;
                data[cd++] = folds ? 0 : splits; // the merge skips a folded row
                data[cd++] = at;
                if (folds) {
                    // one CTA walks all of the row's splits and folds them itself (no partial slots); one row a CTA, which
                    // attention.cu's folded running O relies on (no upper MMA rows at <= 8 heads a KV head)
                    d = descriptor(d, at, 1, start, tabOffs[wi], 0, splits, -1, drow);
                    drow++;
                    continue;
                }
                // the row's own splits packed in order into its CTAs (a graph's fixed count is sized for the bucket): each
                // CTA takes splits while they fit its share, the keys left over the CTAs left rounded up to whole 128-key
                // units (at least one split; the last CTA takes what is left), so a CTA walks at most a share or one
                // split, and a CTA that stops short (the next split did not fit) raises the shares after it; where all
                // splits are 128 keys the longest run is ceil(splits / CTAs) splits, as in the plan before the splits
                // grew. CTAs past the row's splits are empty (no split to walk)
                int s = 0;
                for (int j = 0; j < ctasOfRow; j++) {
                    int a = s;
                    if (j == ctasOfRow - 1) {
                        s = splits;
                    } else if (s < splits) {
                        long left = KeySplits.start(splits) - KeySplits.start(s), ctasLeft = ctasOfRow - j;
                        long share = Math.ceilDiv(Math.ceilDiv(left, ctasLeft), KeySplits.MIN) * KeySplits.MIN;
                        s++;
                        while (s < splits && KeySplits.start(s + 1) - KeySplits.start(a) <= share) {
                            s++;
                        }
                    }
                    d = descriptor(d, at, 1, start, tabOffs[wi], a, s, part + a, drow);
                }
                part += slotsOfRow;
                drow++;
            }
        }
        for (int wi = 0; wi < windows.size(); wi++) {
            Window w = windows.get(wi);
            int len = w.tokens().length, start = w.start();
            if (rowwise(len)) {
                continue;
            }
            int lastSplit = KeySplits.of(start + len - 1);
            // the last rows (the most keys) first, so the longest CTAs start in the first wave
            for (int r = (len - 1) / tileRows * tileRows; r >= 0; r -= tileRows) {
                d = descriptor(d, rowOf[wi] + r, Math.min(tileRows, len - r), start + r, tabOffs[wi], 0, lastSplit + 1, -1, 0);
            }
        }
    }

    /**
     * Rows of a window up to which each row's attention runs as a decode row (split over the keys, flash-decoding) rather
     * than in row tiles that walk every key (phase 0). Both compute the same values bit for bit (the kernel contract), so the
     * choice is speed only: a drafted window being verified has few rows, and phase 0 would give it one CTA per KV head
     * (docs/bench/CHOICES.md).
     */
    static final int ROWWISE_ROWS = 17;

    /**
     * A decode row that its split CTAs would cover in at most this many CTAs, in a step of at least
     * {@link #FOLD_MIN_CTAS} rows times KV heads, gets one CTA that walks all of its splits and folds them as a
     * prefill CTA does (the same bits): no split states written and read back, no merge for it.
     */
    static final int FOLD_MAX_CTAS = 4, FOLD_MIN_CTAS = 256;
    /** Whether this step's decode rows are many enough to fold their splits in their CTAs when few CTAs would cover them. */
    private final boolean foldRows;

    private boolean folds(int ctasOfRow) {
        return foldRows && ctasOfRow <= FOLD_MAX_CTAS;
    }

    /** A decode row's partial slots: its splits, or a graph's fixed count. */
    private static int slotsOf(int position, int fixedSplits) {
        return fixedSplits > 0 ? fixedSplits : KeySplits.count(position + 1);
    }

    /** A decode row's CTAs: its slots' keys in runs of keysPerCta (the same count for every row of a graph's bucket). */
    private int ctasOfRow(int slots) {
        return Math.ceilDiv(KeySplits.start(slots), keysPerCta);
    }

    static boolean rowwise(int len) {
        return len <= ROWWISE_ROWS;
    }

    private int descriptor(int d, int row0, int rows, int pos0, int tabOff, int s0, int s1, int part, int decodeRow) {
        data[d] = row0;
        data[d + 1] = rows;
        data[d + 2] = pos0;
        data[d + 3] = tabOff;
        data[d + 4] = s0;
        data[d + 5] = s1;
        data[d + 6] = part;
        data[d + 7] = decodeRow;
        return d + 8;
    }
}

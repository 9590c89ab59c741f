package dev.spindle.backend.cuda;

import dev.spindle.backend.KeySplits;
import dev.spindle.step.ModelStep.Window;

import java.util.ArrayList;
import java.util.List;

/** Which steps replay a captured CUDA graph, and under which key a pass keeps each graph. */
final class GraphKeys {
    /** Split slots a captured step may give its rows at most (each about 40 KB on the 33B shape: 2.6 GB). */
    static final long MAX_PARTIALS = 65536;

    private GraphKeys() {
    }

    /**
     * The split bucket (the splits of a power of two of keys: KeySplits.count) of a graph-eligible step, or 0 when the
     * step runs without a graph, for a pass whose head takes up to {@code logitRowsMax} rows in one pass. Eligible:
     * windows short enough that each row's attention runs as a decode row (StepPlan.rowwise: decode rows, drafted windows
     * being verified, short prompt tails), each wanting some logits, all logit rows in one pass of the head.
     */
    static int splits(List<Window> windows, int logitRowsMax) {
        if (windows.size() > logitRowsMax) {
            return 0;
        }
        int keys = KeySplits.MIN, logitRows = 0;
        for (Window w : windows) {
            int len = w.tokens().length, rows = w.logitRows().length;
            if (!StepPlan.rowwise(len) || rows == 0) {
                return 0;
            }
            logitRows += rows;
            // every row of a graph-eligible window is a decode row (StepPlan.rowwise): the bucket covers the last one's keys
            keys = Math.max(keys, w.start() + len);
        }
        // the splits of a power of two of keys (below 16K, a power of two of splits)
        int bucket = KeySplits.count(Integer.bitCount(keys) == 1 ? keys : Integer.highestOneBit(keys) << 1);
        int rows = windows.stream().mapToInt(w -> w.tokens().length).sum();
        // a graph gives every row the bucket's split slots: many short rows beside one long context would take gigabytes
        if (logitRows > logitRowsMax || (long) rows * bucket > MAX_PARTIALS) {
            return 0;
        }
        return bucket;
    }

    /**
     * A captured graph's shape: split bucket, greedy head, the step's rows and logit rows, the tap layers (their copies
     * into the tap buffer are part of the graph). Every row of a graph-eligible step
     * is a decode row (StepPlan.rowwise), so the launches (CTA counts, GEMM sizes, the head's rows) and every offset of the
     * step's integers depend on these four numbers only; which rows belong to which window, their positions, tables and the
     * rows whose logits are gathered are data in the uploaded plan. One graph thus serves every mix of decode rows and drafted
     * windows with the same row counts.
     */
    static List<Integer> key(List<Window> windows, int splits, boolean greedy, int[] taps) {
        int rows = 0, logitRows = 0;
        for (Window w : windows) {
            rows += w.tokens().length;
            logitRows += w.logitRows().length;
        }
        List<Integer> key = new ArrayList<>(List.of(splits, greedy ? 1 : 0, rows, logitRows));
        for (int t : taps) {
            key.add(t);
        }
        return List.copyOf(key);
    }
}

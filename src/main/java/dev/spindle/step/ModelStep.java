package dev.spindle.step;

import java.util.List;
import java.util.stream.IntStream;

/**
 * One forward step: windows of sequences, each a run of tokens at consecutive positions read and
 * written through its block table. All windows' rows share every matmul (one pass over the
 * weights); attention runs per window over its own blocks; a row's result never depends on the
 * other windows (batch invariance) or on the window it sits in.
 *
 * @param windows   the sequences' windows, in batch order
 * @param tapLayers executed layers (0-based, layer + loop x numLayers) after which the residual stream of every
 *                  row of a window with {@link Window#tap()} is read back (what a draft head reads); empty for none
 * @param tapsToHost whether the taps come back to the host in {@link StepOutput#taps()}; false where the reader takes
 *                  them from the backend's device (a CUDA head beside its CUDA target): the output's entries are then
 *                  null, and the rows stay there, in the step's row order (windows in order), until the next step
 * @param fed       empty, or per window -1 or a logit row of the step {@linkplain ForwardPass#start started} just before
 *                  this one on the same backend (rows in that step's order: windows in order, each window's wanted rows in
 *                  order) whose token was drawn on the device: that token is the window's first token, and the host's
 *                  {@code tokens[0]} is a placeholder never read. So a step can start before the previous step's tokens
 *                  reach the host (only where {@link ForwardPass#runsAhead()})
 */
public record ModelStep(List<Window> windows, int[] tapLayers, boolean tapsToHost, int[] fed) {
    private static final int[] NONE = new int[0];

    public ModelStep {
        windows = List.copyOf(windows);
        tapLayers = tapLayers.clone();
        fed = fed.clone();
        if (fed.length != 0 && fed.length != windows.size()) {
            throw new IllegalArgumentException("fed rows are per window: " + fed.length + " for " + windows.size() + " windows");
        }
    }

    public ModelStep(List<Window> windows, int[] tapLayers, boolean tapsToHost) {
        this(windows, tapLayers, tapsToHost, NONE);
    }

    /** The previous step's logit row whose drawn token is window {@code window}'s first token, or -1 (its tokens are the host's). */
    public int fedRow(int window) {
        return fed.length == 0 ? -1 : fed[window];
    }

    /** Whether any window's first token is fed from the previous step's draws. */
    public boolean feeds() {
        for (int f : fed) {
            if (f >= 0) {
                return true;
            }
        }
        return false;
    }

    public ModelStep(List<Window> windows) {
        this(windows, NONE);
    }

    public ModelStep(List<Window> windows, int[] tapLayers) {
        this(windows, tapLayers, true);
    }

    /**
     * @param tokens    the window's tokens, at positions [start, start + tokens.length)
     * @param start     the first position (the sequence's written KV length)
     * @param table     where the positions' K/V live; read only
     * @param logitRows rows of the window (ascending) whose logits are wanted: none, the last, all, or chosen ones
     * @param draw      null, or the rule by which the device draws a token from each wanted row (logits stay there)
     * @param tap       whether this window's rows are read back at {@link #tapLayers()}
     */
    public record Window(int[] tokens, int start, BlockIds table, int[] logitRows, Draw draw, boolean tap) {
        public Window {
            if (tokens.length == 0) {
                throw new IllegalArgumentException("empty window");
            }
            if (start < 0) {
                throw new IllegalArgumentException("negative start position " + start);
            }
        }

        public Window(int[] tokens, int start, BlockIds table, int[] logitRows, Draw draw) {
            this(tokens, start, table, logitRows, draw, false);
        }

        public boolean wantsLogits() {
            return logitRows.length > 0;
        }
    }

    /**
     * A token drawn on the device from a logits row, by the engine's sampling rule
     * (sample.Sampler) without penalties, logit bias, grammar or logprobs.
     *
     * @param temperature 0 = greedy
     * @param topK        0 = off
     * @param topP        1 = off
     * @param minP        0 = off
     * @param u           per wanted row, the sequence's uniform draw in [0, 1) (unused when greedy)
     */
    public record Draw(double temperature, int topK, double topP, double minP, double[] u) {
        public static Draw greedy(int rows) {
            return new Draw(0, 0, 1, 0, new double[rows]);
        }
    }

    public static int[] noRows() {
        return NONE;
    }

    public static int[] lastRow(int len) {
        return new int[]{len - 1};
    }

    public static int[] allRows(int len) {
        return IntStream.range(0, len).toArray();
    }

    public int rows() {
        int n = 0;
        for (Window w : windows) {
            n += w.tokens().length;
        }
        return n;
    }
}

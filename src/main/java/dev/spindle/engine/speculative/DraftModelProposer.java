package dev.spindle.engine.speculative;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.KvCapacityException;
import dev.spindle.sample.Sampler;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.Proposal;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Drafts with a smaller model on the same tokenizer: per step, every drafting sequence's new
 * committed tokens go through the drafter in one batched forward (its last row gives the first
 * draft), then each further draft is one batched single-row step, greedy (so q is one-hot). The
 * drafter's KV lives in its own block pool; each sequence's table holds the tokens it was fed, and
 * whatever follows the first of them that the target did not commit is cut before the next draft.
 */
public final class DraftModelProposer implements Proposer {
    private final ForwardPass drafter;
    private final BlockPool pool;
    private final int targetVocab;
    private final int maxCatchUp;
    private final Map<Long, State> states = new HashMap<>();
    private final AutoCloseable owner;

    /** One sequence in the drafter: its table, and the tokens it was fed at positions [0, table.tokens()). */
    private static final class State {
        final BlockTable table;
        int[] fed = new int[64];
        int committed; // positions known to hold committed tokens (a lower bound of the common prefix)
        boolean disabled; // the sequence holds a token the drafter cannot read
        int waitCalls;    // calls to sit out after the drafter's pool was full

        State(BlockPool pool) {
            table = new BlockTable(pool);
        }

        void feed(int[] tokens, int from, int to) {
            int at = table.tokens();
            if (fed.length < at + (to - from)) {
                fed = Arrays.copyOf(fed, Math.max(fed.length * 2, at + (to - from)));
            }
            System.arraycopy(tokens, from, fed, at, to - from);
        }
    }

    /**
     * @param drafter     the draft model's backend (its own KV capacity)
     * @param targetVocab the target's vocabulary size; the drafter's may be smaller (it never proposes past its rows)
     * @param maxCatchUp  tokens the drafter computes per step at most to catch up on committed text (a long new prompt
     *                    is fed over several steps, drafting nothing until it is in)
     * @param owner       closed with the proposer (the drafter's backend and weights)
     */
    public DraftModelProposer(ForwardPass drafter, int targetVocab, int maxCatchUp, AutoCloseable owner) {
        if (drafter.config().vocabSize() > targetVocab) {
            throw new IllegalArgumentException("the draft model has " + drafter.config().vocabSize() + " vocabulary rows, more than the target's "
                    + targetVocab + ": its drafts could name tokens the target does not have");
        }
        if (maxCatchUp < 1) {
            throw new IllegalArgumentException("the drafter's catch-up budget must be >= 1 token, got " + maxCatchUp);
        }
        this.drafter = drafter;
        this.pool = new BlockPool(drafter.kvCapacity());
        this.targetVocab = targetVocab;
        this.maxCatchUp = maxCatchUp;
        this.owner = owner;
    }

    @Override
    public List<Proposal> propose(List<DraftRequest> requests) {
        int n = requests.size();
        int[][] drafts = new int[n][];
        int[] wanted = new int[n];
        List<Integer> active = new ArrayList<>();
        List<ModelStep.Window> windows = new ArrayList<>();
        int budget = maxCatchUp;
        int drafterVocab = drafter.config().vocabSize(), maxPos = drafter.config().maxPositions();
        for (int i = 0; i < n; i++) {
            DraftRequest r = requests.get(i);
            drafts[i] = new int[0];
            State s = states.computeIfAbsent(r.id(), id -> new State(pool));
            if (s.disabled) {
                continue;
            }
            if (s.waitCalls > 0) {
                s.waitCalls--;
                continue;
            }
            // cut what the target did not commit: the common prefix of what was fed and the committed tokens
            int common = Math.min(s.committed, s.table.tokens());
            while (common < s.table.tokens() && common < r.length() && s.fed[common] == r.tokens()[common]) {
                common++;
            }
            // the drafter needs the last committed token's logits: recompute it if it was fed already (a draft the target took)
            common = Math.min(common, r.length() - 1);
            s.table.truncate(common);
            s.committed = common;
            int from = common, to = r.length();
            for (int t = from; t < to; t++) {
                if (r.tokens()[t] >= drafterVocab) { // a token past the drafter's rows: it cannot read this sequence
                    disable(s);
                    break;
                }
            }
            if (s.disabled || to + r.maxTokens() > maxPos) {
                continue;
            }
            boolean complete = to - from <= budget;
            int end = complete ? to : from + budget;
            if (end == from) {
                continue;
            }
            try {
                s.table.reserve(end + (complete ? r.maxTokens() - 1 : 0));
            } catch (KvCapacityException full) {
                // the drafter's pool is full: this sequence gives its blocks back and drafts nothing for a while, then tries again
                s.table.release();
                s.committed = 0;
                s.waitCalls = 64;
                continue;
            }
            budget -= end - from;
            s.feed(r.tokens(), from, end);
            windows.add(window(Arrays.copyOfRange(r.tokens(), from, end), s.table, complete));
            if (complete) {
                wanted[i] = r.maxTokens();
                active.add(i);
            } else {
                active.add(~i); // catching up only
            }
        }
        int[] next = run(windows);
        advanceAll(windows);
        // further drafts: one row per drafting sequence per step
        List<Integer> drafting = new ArrayList<>();
        for (int j = 0, w = 0; j < active.size(); j++) {
            int i = active.get(j);
            if (i < 0) {
                continue;
            }
            drafts[i] = new int[]{next[w++]};
            if (wanted[i] > 1) {
                drafting.add(i);
            }
        }
        for (int round = 1; !drafting.isEmpty(); round++) {
            List<ModelStep.Window> step = new ArrayList<>();
            for (int i : drafting) {
                State s = states.get(requests.get(i).id());
                int token = drafts[i][round - 1];
                s.feed(new int[]{token}, 0, 1);
                step.add(window(new int[]{token}, s.table, true));
            }
            int[] ids = run(step);
            advanceAll(step);
            List<Integer> still = new ArrayList<>();
            for (int j = 0; j < drafting.size(); j++) {
                int i = drafting.get(j);
                drafts[i] = Arrays.copyOf(drafts[i], round + 1);
                drafts[i][round] = ids[j];
                if (round + 1 < wanted[i]) {
                    still.add(i);
                }
            }
            drafting = still;
        }
        List<Proposal> out = new ArrayList<>(n);
        for (int[] d : drafts) {
            out.add(Proposal.of(d));
        }
        return out;
    }

    private ModelStep.Window window(int[] tokens, BlockTable table, boolean logits) {
        int[] rows = logits ? ModelStep.lastRow(tokens.length) : ModelStep.noRows();
        ModelStep.Draw draw = logits && drafter.drawsOnDevice() ? ModelStep.Draw.greedy(1) : null;
        return new ModelStep.Window(tokens, table.tokens(), table, rows, draw);
    }

    /** Runs the drafter over the windows; returns the greedy token of each window that wants logits, in order. */
    private int[] run(List<ModelStep.Window> windows) {
        if (windows.isEmpty()) {
            return new int[0];
        }
        StepOutput out = drafter.execute(new ModelStep(windows));
        int[] ids = new int[windows.size()];
        int m = 0;
        for (int w = 0; w < windows.size(); w++) {
            if (!windows.get(w).wantsLogits()) {
                continue;
            }
            int[] drawn = out.tokens().get(w);
            ids[m++] = drawn != null ? drawn[0] : Sampler.argmax(out.logits().get(w)[0]);
        }
        return Arrays.copyOf(ids, m);
    }

    private static void advanceAll(List<ModelStep.Window> windows) {
        for (ModelStep.Window w : windows) {
            ((BlockTable) w.table()).advance(w.start() + w.tokens().length); // the tables this driver made
        }
    }

    private static void disable(State s) {
        s.disabled = true;
        s.table.release();
    }

    @Override
    public void release(long id) {
        State s = states.remove(id);
        if (s != null) {
            s.table.release();
        }
    }

    /** The drafter's KV pool: blocks free now (for tests: every block is back once every sequence is released). */
    public int freeBlocks() {
        return pool.freeBlocks();
    }

    public int totalBlocks() {
        return pool.numBlocks();
    }

    @Override
    public String describe() {
        return String.format("draft model (%d layers, hidden %d, vocabulary %d; KV pool %d blocks of %d tokens)", drafter.config().numLayers(),
                drafter.config().hiddenSize(), drafter.config().vocabSize(), pool.numBlocks(), pool.blockSize());
    }

    @Override
    public void close() {
        for (State s : states.values()) {
            s.table.release();
        }
        states.clear();
        try {
            owner.close();
        } catch (Exception e) {
            throw new IllegalStateException("closing the draft model: " + e.getMessage(), e);
        }
    }
}

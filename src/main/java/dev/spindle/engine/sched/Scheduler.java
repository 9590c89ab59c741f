package dev.spindle.engine.sched;

import dev.spindle.engine.TokenSink;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.PrefixHash;
import dev.spindle.sample.SamplingParams;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.random.RandomGenerator;

/**
 * Continuous batching over the paged KV pool. Each step: running sequences first (in
 * admission order), each taking what it still needs (a decode token, or the next
 * prefill chunk) from a per-step token budget; then waiting sequences are admitted
 * while budget, sequence slots and blocks last, each starting on its longest cached
 * prefix. When blocks run out, the newest running sequence is preempted (its blocks
 * freed, recomputed later). The scheduler touches block ids only, never device memory.
 */
public final class Scheduler {
    private final BlockPool pool;
    private final PrefixHash prefixHash = PrefixHash.random(); // keys the pool's cached blocks, under a key of this engine's
    private final int maxBatchedTokens;
    private final int maxSequences;
    private final int vocab;
    private final ArrayDeque<Sequence> waiting = new ArrayDeque<>();
    private final List<Sequence> running = new ArrayList<>();
    long prefixQueriedTokens, prefixHitTokens, preemptions;

    /**
     * @param maxBatchedTokens tokens computed per step at most (prefill chunks are cut to fit)
     * @param maxSequences     sequences running at once at most
     */
    public Scheduler(BlockPool pool, int maxBatchedTokens, int maxSequences, int vocab) {
        this.pool = pool;
        this.maxBatchedTokens = maxBatchedTokens;
        this.maxSequences = maxSequences;
        this.vocab = vocab;
    }

    public Sequence add(long id, int[] prompt, SamplingParams params, TokenSink sink, RandomGenerator rng) {
        Sequence s = new Sequence(id, prompt, params, sink, rng, new BlockTable(pool), vocab);
        waiting.add(s);
        return s;
    }

    public int running() {
        return running.size();
    }

    public int waiting() {
        return waiting.size();
    }

    public boolean idle() {
        return running.isEmpty() && waiting.isEmpty();
    }

    /** Running sequences that decode this step (one uncomputed token each): the ones that may draft. */
    List<Sequence> decoding() {
        List<Sequence> out = new ArrayList<>();
        for (Sequence s : running) {
            if (s.length - s.computed() == 1) {
                out.add(s);
            }
        }
        return out;
    }

    /**
     * @param drafts per decoding sequence, draft tokens to verify after its next token (the window
     *               grows by them while the step's budget and free blocks allow; drafting never preempts)
     */
    public StepPlan schedule(java.util.Map<Sequence, int[]> drafts) {
        List<StepPlan.Entry> entries = new ArrayList<>();
        int budget = maxBatchedTokens;
        for (Sequence s : new ArrayList<>(running)) {
            if (budget == 0) {
                break;
            }
            if (!running.contains(s)) {
                continue; // preempted for an older sequence in this loop
            }
            int n = Math.min(s.length - s.computed(), budget);
            if (!makeRoom(s, s.computed() + n)) {
                continue; // s itself was preempted
            }
            s.table.reserve(s.computed() + n);
            entries.add(new StepPlan.Entry(s, s.computed(), n, s.computed() + n == s.length, StepPlan.NO_DRAFTS));
            budget -= n;
        }
        // drafts widen decode windows only once every running sequence has its own tokens, within what is left of the budget and
        // from blocks nobody holds (never a cached prefix's, never by preempting): speculation must not cost anyone else
        for (int i = 0; i < entries.size() && budget > 0 && !drafts.isEmpty(); i++) {
            StepPlan.Entry e = entries.get(i);
            Sequence s = e.sequence();
            int[] d = e.count() == 1 && e.samples() ? drafts.getOrDefault(s, StepPlan.NO_DRAFTS) : StepPlan.NO_DRAFTS;
            int extra = Math.min(d.length, budget);
            while (extra > 0 && blocksNeeded(s, e.from() + 1 + extra) > pool.unheldBlocks()) {
                extra--;
            }
            if (extra > 0) {
                s.table.reserve(e.from() + 1 + extra);
                entries.set(i, new StepPlan.Entry(s, e.from(), 1 + extra, true, java.util.Arrays.copyOf(d, extra)));
                budget -= extra;
            }
        }
        while (budget > 0 && !waiting.isEmpty() && running.size() < maxSequences) {
            Sequence s = waiting.peek();
            if (s.table.numBlocks() == 0) {
                adoptCachedPrefix(s);
            }
            int n = Math.min(s.length - s.computed(), budget);
            if (blocksNeeded(s, s.computed() + n) > pool.freeBlocks()) {
                // not now: give the cached blocks back (they stay cached) so they cannot starve the running ones
                s.table.release();
                s.registeredBlocks = 0;
                break;
            }
            waiting.poll();
            s.table.reserve(s.computed() + n);
            running.add(s);
            s.started = true;
            entries.add(new StepPlan.Entry(s, s.computed(), n, s.computed() + n == s.length, StepPlan.NO_DRAFTS));
            budget -= n;
        }
        return new StepPlan(entries);
    }

    /**
     * Whether the next waiting sequence could be admitted beside {@code decodeTokens} tokens of the running sequences, as
     * {@link #schedule} would admit it now (a free sequence slot, budget left, blocks for its first chunk after its cached
     * prefix): the next step must then be scheduled, not started ahead. Reads the prefix cache without taking anything.
     */
    boolean admissionDue(int decodeTokens) {
        Sequence s = waiting.peek();
        int budget = maxBatchedTokens - decodeTokens;
        if (s == null || running.size() >= maxSequences || budget <= 0) {
            return false;
        }
        int bs = pool.blockSize(), have = s.table.numBlocks(), hits = 0, idle = 0;
        if (have == 0) {
            for (int id : cachedPrefix(s, false).ids()) {
                hits++;
                idle += pool.refCount(id) == 0 ? 1 : 0; // adopting it takes it from the blocks an allocation can take
            }
        }
        int computed = have == 0 ? hits * bs : s.computed(), n = Math.min(s.length - computed, budget);
        return (computed + n + bs - 1) / bs - Math.max(have, hits) <= pool.freeBlocks() - idle;
    }

    /**
     * Reserves the blocks of a step started ahead (each entry one token past its sequence's end), all or none: only from
     * free blocks, never by preempting. False when they do not fit (the step is then scheduled as usual).
     */
    boolean reserveAhead(List<StepPlan.Entry> entries) {
        long needed = 0;
        for (StepPlan.Entry e : entries) {
            needed += blocksNeeded(e.sequence(), e.from() + e.count());
        }
        if (needed > pool.freeBlocks()) {
            return false;
        }
        for (StepPlan.Entry e : entries) {
            e.sequence().table.reserve(e.from() + e.count());
        }
        return true;
    }

    /** Frees blocks by preempting the newest running sequences until {@code s} can grow to {@code length}; false if s was the one preempted. */
    private boolean makeRoom(Sequence s, int length) {
        while (blocksNeeded(s, length) > pool.freeBlocks()) {
            Sequence victim = running.getLast();
            preempt(victim);
            if (victim == s) {
                return false;
            }
        }
        return true;
    }

    private int blocksNeeded(Sequence s, int length) {
        return Math.max(0, (length + pool.blockSize() - 1) / pool.blockSize() - s.table.numBlocks());
    }

    private final List<Sequence> preempted = new ArrayList<>();

    /** The sequences preempted since the last call (their proposer state can go). */
    List<Sequence> takePreempted() {
        List<Sequence> out = new ArrayList<>(preempted);
        preempted.clear();
        return out;
    }

    private void preempt(Sequence s) {
        preempted.add(s);
        running.remove(s);
        s.table.release();
        s.registeredBlocks = 0;
        s.lastHash = PrefixHash.ROOT;
        waiting.addFirst(s);
        preemptions++;
    }

    /** Starts a sequence on the cached blocks of its longest cached full-block prefix, leaving at least one token to compute. */
    private void adoptCachedPrefix(Sequence s) {
        int bs = pool.blockSize();
        int full = s.promptLogprobs != null ? 0 : (s.length - 1) / bs;
        Prefix hits = cachedPrefix(s, true);
        if (!s.admittedOnce) {
            prefixQueriedTokens += (long) full * bs;
            prefixHitTokens += (long) hits.ids().length * bs;
            s.cachedTokens = Math.min(hits.ids().length * bs, s.promptLength);
            s.admittedOnce = true;
        }
        s.table.adoptCached(hits.ids());
        s.registeredBlocks = hits.ids().length;
        s.lastHash = hits.hash();
    }

    /** The cached blocks of a sequence's longest cached full-block prefix, and the chained hash after them. */
    private record Prefix(int[] ids, long hash) {
    }

    /**
     * The longest cached full-block prefix of {@code s}, never the whole sequence (its last token must be computed for
     * logits; a scoring request computes every prompt position, needing each one's logits): with a reference taken on each
     * block where {@code take} ({@link BlockPool#lookup}), else only found ({@link BlockPool#find}).
     */
    private Prefix cachedPrefix(Sequence s, boolean take) {
        int bs = pool.blockSize();
        int full = s.promptLogprobs != null ? 0 : (s.length - 1) / bs;
        long hash = PrefixHash.ROOT;
        List<Integer> hits = new ArrayList<>();
        for (int b = 0; b < full; b++) {
            long h = prefixHash.of(hash, s.tokens, b * bs, (b + 1) * bs);
            int id = take ? pool.lookup(h, hash, s.tokens, b * bs) : pool.find(h, hash, s.tokens, b * bs);
            if (id < 0) {
                break;
            }
            hits.add(id);
            hash = h;
        }
        return new Prefix(hits.stream().mapToInt(Integer::intValue).toArray(), hash);
    }

    public BlockPool pool() {
        return pool;
    }

    /** After a step: key the sequence's newly full blocks in the prefix cache. */
    void registerFullBlocks(Sequence s) {
        int bs = pool.blockSize();
        int full = s.computed() / bs;
        while (s.registeredBlocks < full) {
            int b = s.registeredBlocks;
            long parent = s.lastHash;
            s.lastHash = prefixHash.of(parent, s.tokens, b * bs, (b + 1) * bs);
            pool.cache(s.table.block(b), s.lastHash, parent, s.tokens, b * bs);
            s.registeredBlocks++;
        }
    }

    /** Removes a finished or cancelled sequence and frees its blocks (full ones stay cached). */
    void finish(Sequence s) {
        running.remove(s);
        waiting.remove(s);
        s.table.release();
    }

    /** Every sequence, running then waiting. */
    List<Sequence> all() {
        List<Sequence> out = new ArrayList<>(running);
        out.addAll(waiting);
        return out;
    }

    /** The sequence with this id, running or waiting, or null. */
    Sequence find(long id) {
        for (Sequence s : running) {
            if (s.id == id) {
                return s;
            }
        }
        for (Iterator<Sequence> it = waiting.iterator(); it.hasNext(); ) {
            Sequence s = it.next();
            if (s.id == id) {
                return s;
            }
        }
        return null;
    }
}

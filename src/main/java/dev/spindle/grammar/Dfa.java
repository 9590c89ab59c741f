package dev.spindle.grammar;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * A deterministic automaton over Unicode code points, built once per schema and then only read
 * (so sequences on several threads share it). Code points are grouped in classes: class k is
 * [bounds[k], bounds[k+1]). Every state can still reach acceptance (dead states are removed, a
 * missing transition is -1), so a prefix the automaton steps through can always be completed.
 */
final class Dfa {
    /** States an automaton may have: a pattern past it is refused as too complex, not decoded slowly. */
    static final int MAX_STATES = 4096;

    private final int[] bounds;   // class starts, ascending, bounds[0] == 0
    private final int[][] next;   // (state, class) -> state, or -1
    private final boolean[] accept;
    private final int[] dist;     // per state: fewest code points to acceptance
    private final long[] stable;  // per state: Recognizer.stableExcept of a string in it (the special characters that leave it)

    private Dfa(int[] bounds, int[][] next, boolean[] accept) {
        this.bounds = bounds;
        this.next = next;
        this.accept = accept;
        this.dist = distances();
        this.stable = new long[next.length];
        for (int q = 0; q < next.length; q++) {
            stable[q] = stableMask(q);
        }
    }

    /** The strings containing a match of {@code pattern} (ECMA-262 semantics: unanchored unless ^ or $ say so). */
    static Dfa search(Regex.Node pattern) {
        Regex.Node any = new Regex.Repeat(new Regex.Chars(Regex.ALL), 0, -1);
        return build(new Regex.Seq(List.of(any, pattern, any)));
    }

    /** The strings containing a match of an ECMA-262 {@code pattern}, leading lookaheads included ({@link Regex#parseWithLookaheads}). */
    static Dfa pattern(String pattern) {
        Regex.Parsed p = Regex.parseWithLookaheads(pattern);
        Dfa d = search(p.main());
        Regex.Node rest = new Regex.Repeat(new Regex.Chars(Regex.ALL), 0, -1);
        for (Regex.Node a : p.positive()) {
            d = d.and(exact(new Regex.Seq(List.of(a, rest))));
        }
        for (Regex.Node a : p.negative()) {
            d = d.and(exact(new Regex.Seq(List.of(a, rest))).not());
        }
        return d;
    }

    /** The strings {@code pattern} matches whole. */
    static Dfa exact(Regex.Node pattern) {
        return build(pattern);
    }

    /** Exactly these strings. */
    static Dfa literals(List<String> texts) {
        List<Regex.Node> options = new ArrayList<>();
        for (String t : texts) {
            List<Regex.Node> chars = new ArrayList<>();
            t.codePoints().forEach(cp -> chars.add(new Regex.Chars(new int[]{cp, cp})));
            options.add(new Regex.Seq(chars));
        }
        return build(new Regex.Alt(options));
    }

    int start() {
        return next.length == 0 ? -1 : 0;
    }

    boolean empty() {
        return next.length == 0;
    }

    int states() {
        return next.length;
    }

    /** The state after {@code cp}, or -1 when no accepted string continues this way. */
    int step(int q, int cp) {
        return next[q][classOf(cp)];
    }

    /** Whether some code point in [lo, hi] leads from {@code q} to a state {@code ok} takes. */
    boolean anyStep(int q, int lo, int hi, java.util.function.IntPredicate ok) {
        for (int k = classOf(lo); k < bounds.length && bounds[k] <= hi; k++) {
            int t = next[q][k];
            if (t >= 0 && ok.test(t)) {
                return true;
            }
        }
        return false;
    }

    boolean accepting(int q) {
        return accept[q];
    }

    /** Fewest code points from {@code q} to acceptance. */
    int distance(int q) {
        return dist[q];
    }

    /** The special characters ({@link TokenTrie#bit}) that leave {@code q}, or {@link TokenTrie#NOT_STABLE} when a plain one does. */
    long stableExcept(int q) {
        return stable[q];
    }

    private int classOf(int cp) {
        int k = Arrays.binarySearch(bounds, cp);
        return k >= 0 ? k : -k - 2;
    }

    /** The strings both accept. */
    Dfa and(Dfa o) {
        int[] b = mergedBounds(bounds, o.bounds);
        Map<Long, Integer> ids = new HashMap<>();
        List<int[]> rows = new ArrayList<>();
        List<Boolean> acc = new ArrayList<>();
        ArrayDeque<long[]> work = new ArrayDeque<>();
        if (empty() || o.empty()) {
            return new Dfa(new int[]{0}, new int[0][], new boolean[0]);
        }
        ids.put(0L, 0);
        work.add(new long[]{0, 0});
        rows.add(null);
        acc.add(accept[0] && o.accept[0]);
        while (!work.isEmpty()) {
            long[] pq = work.poll();
            int p = (int) pq[0], q = (int) pq[1];
            int[] row = new int[b.length];
            for (int k = 0; k < b.length; k++) {
                int np = step(p, b[k]), nq = np < 0 ? -1 : o.step(q, b[k]);
                if (nq < 0) {
                    row[k] = -1;
                    continue;
                }
                long key = (long) np << 32 | nq;
                Integer id = ids.get(key);
                if (id == null) {
                    id = rows.size();
                    if (id >= MAX_STATES) {
                        throw new IllegalArgumentException("string constraints too complex for constrained decoding (more than " + MAX_STATES + " states)");
                    }
                    ids.put(key, id);
                    rows.add(null);
                    acc.add(accept[np] && o.accept[nq]);
                    work.add(new long[]{np, nq});
                }
                row[k] = id;
            }
            rows.set(ids.get((long) p << 32 | q), row);
        }
        return pruned(b, rows, acc);
    }

    /** The strings this one does not accept. */
    Dfa not() {
        int n = next.length, sink = n;
        List<int[]> rows = new ArrayList<>();
        List<Boolean> acc = new ArrayList<>();
        for (int q = 0; q <= n; q++) {
            int[] row = new int[bounds.length];
            for (int k = 0; k < bounds.length; k++) {
                int t = q == n ? -1 : next[q][k];
                row[k] = t < 0 ? sink : t;
            }
            rows.add(row);
            acc.add(q == n || !accept[q]);
        }
        return pruned(bounds, rows, acc);
    }

    private static int[] mergedBounds(int[] a, int[] b) {
        TreeSet<Integer> s = new TreeSet<>();
        for (int x : a) {
            s.add(x);
        }
        for (int x : b) {
            s.add(x);
        }
        return s.stream().mapToInt(Integer::intValue).toArray();
    }

    // ---- construction: Thompson NFA, then subsets ----

    private static final class Nfa {
        final List<int[]> sets = new ArrayList<>();     // per state: its character edge's set, or null
        final List<Integer> targets = new ArrayList<>(); // per state: its character edge's target
        final List<List<Integer>> eps = new ArrayList<>();
        final List<Integer> anchor = new ArrayList<>();  // per state: 0 none, 1 an edge to state+1 taken only at the start, 2 only at the end
        final List<Integer> anchorTarget = new ArrayList<>();

        int add() {
            sets.add(null);
            targets.add(-1);
            eps.add(new ArrayList<>());
            anchor.add(0);
            anchorTarget.add(-1);
            return sets.size() - 1;
        }

        /** Builds {@code n} between from and to. */
        void build(Regex.Node n, int from, int to) {
            switch (n) {
                case Regex.Chars c -> {
                    sets.set(from, c.set());
                    targets.set(from, to);
                }
                case Regex.Anchor a -> {
                    anchor.set(from, a.start() ? 1 : 2);
                    anchorTarget.set(from, to);
                }
                case Regex.Seq s -> {
                    int cur = from;
                    for (int i = 0; i < s.parts().size(); i++) {
                        int nx = i == s.parts().size() - 1 ? to : add();
                        int in = add();
                        eps.get(cur).add(in);
                        build(s.parts().get(i), in, nx);
                        cur = nx;
                    }
                    if (s.parts().isEmpty()) {
                        eps.get(from).add(to);
                    }
                }
                case Regex.Alt a -> {
                    for (Regex.Node o : a.options()) {
                        int in = add();
                        eps.get(from).add(in);
                        build(o, in, to);
                    }
                }
                case Regex.Repeat r -> {
                    int cur = from;
                    for (int i = 0; i < r.min(); i++) {
                        int in = add(), out = add();
                        eps.get(cur).add(in);
                        build(r.node(), in, out);
                        cur = out;
                    }
                    if (r.max() < 0) {
                        int in = add(), out = add();
                        eps.get(cur).add(in);
                        eps.get(cur).add(to);
                        build(r.node(), in, out);
                        eps.get(out).add(in);
                        eps.get(out).add(to);
                    } else {
                        for (int i = r.min(); i < r.max(); i++) {
                            int in = add(), out = add();
                            eps.get(cur).add(in);
                            eps.get(cur).add(to);
                            build(r.node(), in, out);
                            cur = out;
                        }
                        eps.get(cur).add(to);
                    }
                }
            }
        }

        BitSet closure(BitSet from, boolean atStart, boolean atEnd) {
            BitSet out = (BitSet) from.clone();
            ArrayDeque<Integer> work = new ArrayDeque<>();
            from.stream().forEach(work::add);
            while (!work.isEmpty()) {
                int s = work.poll();
                List<Integer> nexts = new ArrayList<>(eps.get(s));
                int a = anchor.get(s);
                if (a == 1 && atStart || a == 2 && atEnd) {
                    nexts.add(anchorTarget.get(s));
                }
                for (int t : nexts) {
                    if (!out.get(t)) {
                        out.set(t);
                        work.add(t);
                    }
                }
            }
            return out;
        }
    }

    private static Dfa build(Regex.Node pattern) {
        Nfa nfa = new Nfa();
        int start = nfa.add(), end = nfa.add();
        nfa.build(pattern, start, end);
        TreeSet<Integer> cuts = new TreeSet<>(List.of(0));
        for (int[] set : nfa.sets) {
            if (set != null) {
                for (int i = 0; i < set.length; i += 2) {
                    cuts.add(set[i]);
                    if (set[i + 1] < Regex.MAX_CP) {
                        cuts.add(set[i + 1] + 1);
                    }
                }
            }
        }
        int[] b = cuts.stream().mapToInt(Integer::intValue).toArray();
        BitSet init = new BitSet();
        init.set(start);
        List<BitSet> subsets = new ArrayList<>();
        Map<BitSet, Integer> ids = new HashMap<>();
        List<int[]> rows = new ArrayList<>();
        List<Boolean> acc = new ArrayList<>();
        BitSet first = nfa.closure(init, true, false);
        subsets.add(first);
        ids.put(first, 0);
        acc.add(nfa.closure(first, true, true).get(end));
        for (int i = 0; i < subsets.size(); i++) {
            BitSet cur = subsets.get(i);
            int[] row = new int[b.length];
            for (int k = 0; k < b.length; k++) {
                BitSet moved = new BitSet();
                for (int s = cur.nextSetBit(0); s >= 0; s = cur.nextSetBit(s + 1)) {
                    int[] set = nfa.sets.get(s);
                    if (set != null && Regex.contains(set, b[k])) {
                        moved.set(nfa.targets.get(s));
                    }
                }
                if (moved.isEmpty()) {
                    row[k] = -1;
                    continue;
                }
                BitSet closed = nfa.closure(moved, false, false);
                Integer id = ids.get(closed);
                if (id == null) {
                    id = subsets.size();
                    if (id >= MAX_STATES) {
                        throw new IllegalArgumentException("pattern too complex for constrained decoding (more than " + MAX_STATES + " automaton states)");
                    }
                    ids.put(closed, id);
                    subsets.add(closed);
                    acc.add(nfa.closure(closed, false, true).get(end));
                }
                row[k] = id;
            }
            rows.add(row);
        }
        return pruned(b, rows, acc);
    }

    /** Without the states that cannot reach acceptance, renumbered from 0 (the start); empty when the start is dead. */
    private static Dfa pruned(int[] b, List<int[]> rows, List<Boolean> acc) {
        int n = rows.size();
        List<List<Integer>> into = new ArrayList<>();
        for (int q = 0; q < n; q++) {
            into.add(new ArrayList<>());
        }
        for (int q = 0; q < n; q++) {
            for (int t : rows.get(q)) {
                if (t >= 0) {
                    into.get(t).add(q);
                }
            }
        }
        boolean[] live = new boolean[n];
        ArrayDeque<Integer> work = new ArrayDeque<>();
        for (int q = 0; q < n; q++) {
            if (acc.get(q)) {
                live[q] = true;
                work.add(q);
            }
        }
        while (!work.isEmpty()) {
            for (int p : into.get(work.poll())) {
                if (!live[p]) {
                    live[p] = true;
                    work.add(p);
                }
            }
        }
        if (n == 0 || !live[0]) {
            return new Dfa(new int[]{0}, new int[0][], new boolean[0]);
        }
        int[] id = new int[n];
        int m = 0;
        for (int q = 0; q < n; q++) {
            id[q] = live[q] ? m++ : -1;
        }
        int[][] next = new int[m][];
        boolean[] accept = new boolean[m];
        for (int q = 0; q < n; q++) {
            if (live[q]) {
                int[] row = rows.get(q).clone();
                for (int k = 0; k < row.length; k++) {
                    row[k] = row[k] < 0 ? -1 : id[row[k]];
                }
                next[id[q]] = row;
                accept[id[q]] = acc.get(q);
            }
        }
        return new Dfa(b, next, accept);
    }

    private int[] distances() {
        int n = next.length;
        int[] d = new int[n];
        Arrays.fill(d, Integer.MAX_VALUE);
        List<List<Integer>> into = new ArrayList<>();
        for (int q = 0; q < n; q++) {
            into.add(new ArrayList<>());
        }
        for (int q = 0; q < n; q++) {
            for (int t : next[q]) {
                if (t >= 0) {
                    into.get(t).add(q);
                }
            }
        }
        ArrayDeque<Integer> work = new ArrayDeque<>();
        for (int q = 0; q < n; q++) {
            if (accept[q]) {
                d[q] = 0;
                work.add(q);
            }
        }
        while (!work.isEmpty()) {
            int q = work.poll();
            for (int p : into.get(q)) {
                if (d[p] == Integer.MAX_VALUE) {
                    d[p] = d[q] + 1;
                    work.add(p);
                }
            }
        }
        return d;
    }

    /**
     * Per length d up to {@code limit}: whether acceptance is reachable from each state in exactly d
     * code points ({@code [state][d]}).
     */
    boolean[][] exactLengths(int limit) {
        int n = next.length;
        boolean[][] r = new boolean[n][limit + 1];
        for (int q = 0; q < n; q++) {
            r[q][0] = accept[q];
        }
        for (int d = 1; d <= limit; d++) {
            for (int q = 0; q < n; q++) {
                for (int k = 0; k < bounds.length && !r[q][d]; k++) {
                    int t = next[q][k];
                    if (t >= 0 && r[t][d - 1] && !surrogates(k)) {
                        r[q][d] = true;
                    }
                }
            }
        }
        return r;
    }

    private boolean surrogates(int k) {
        int lo = bounds[k], hi = k + 1 < bounds.length ? bounds[k + 1] - 1 : Regex.MAX_CP;
        return lo >= 0xD800 && hi <= 0xDFFF;
    }

    private long stableMask(int q) {
        long mask = 0;
        for (int k = 0; k < bounds.length; k++) {
            if (next[q][k] == q || surrogates(k)) {
                continue;
            }
            int lo = bounds[k], hi = k + 1 < bounds.length ? bounds[k + 1] - 1 : Regex.MAX_CP;
            for (int c = lo; c <= hi; c++) {
                if (c > 0xFFFF || !TokenTrie.special((char) c)) {
                    return TokenTrie.NOT_STABLE;
                }
                mask |= TokenTrie.bit((char) c);
            }
        }
        return mask;
    }
}

package dev.spindle.grammar;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Every token's text in one character trie, built once per vocabulary, so that a grammar
 * walks each shared prefix once instead of once per token. Nodes are stored in preorder;
 * tokens are numbered in the trie's (lexicographic) order, so the tokens below a node form
 * one contiguous range of sorted indices, and a whole subtree can be accepted at once.
 * Tokens without text (special tokens, byte pieces of multi-byte characters) are not in it.
 */
public final class TokenTrie {
    /** Characters a grammar may treat specially inside free text; every other character is "plain". */
    public static boolean special(char c) {
        return c < 0x20 || c == '"' || c == '\\' || c == '<';
    }

    /** A special character's bit in a {@link Recognizer#stableExcept} mask (0 for plain characters). */
    public static long bit(char c) {
        return c < 0x20 ? 1L << c : c == '"' ? 1L << 32 : c == '\\' ? 1L << 33 : c == '<' ? 1L << 34 : 0;
    }

    /** The bits of the control characters (below U+0020). */
    public static final long CONTROLS = (1L << 32) - 1;

    /** {@link Recognizer#stableExcept} of a state that plain characters change too. */
    public static final long NOT_STABLE = Long.MIN_VALUE;

    /** The bits of every special character in {@code chars}. */
    public static long bits(String chars) {
        long b = 0;
        for (int i = 0; i < chars.length(); i++) {
            b |= bit(chars.charAt(i));
        }
        return b;
    }

    // per node, preorder; node 0 is the root (no character)
    private final char[] ch;           // the character on the edge into the node
    private final int[] end;           // the preorder index just past the node's subtree
    private final int[] lo, hi;        // sorted-token range of the subtree, node's own tokens first
    private final int[] own;           // tokens whose text ends exactly here (identical texts share a node)
    private final long[] below;        // the special characters on the edges below the node, as bits
    private final int[] height;        // characters on the longest path below the node (0: a leaf)
    private final int[] sortedIds;     // sorted index -> token id
    private final int[] untexted;      // token ids with no text
    private final int vocab;
    private final int longest;         // characters of the longest token text
    // for stable states: tokens without any special character (sorted-order bits), and the other
    // tokens' texts from their first special character on, in a trie of their own whose tokens
    // are this trie's sorted indices (null for a suffix trie itself)
    private long[] plainTokens;
    private TokenTrie suffixes;

    private TokenTrie(char[] ch, int[] end, int[] lo, int[] hi, int[] own, long[] below, int[] sortedIds, int[] untexted, int vocab, int longest) {
        this.ch = ch;
        this.end = end;
        this.lo = lo;
        this.hi = hi;
        this.own = own;
        this.below = below;
        this.sortedIds = sortedIds;
        this.untexted = untexted;
        this.vocab = vocab;
        this.longest = longest;
        this.height = new int[ch.length];
        for (int node = ch.length - 1; node >= 0; node--) { // children after parents in preorder
            for (int c = node + 1; c < end[node]; c = end[c]) {
                height[node] = Math.max(height[node], height[c] + 1);
            }
        }
    }

    /** @param texts per token id its text, or null */
    public static TokenTrie build(String[] texts) {
        TokenTrie t = buildOne(texts);
        String[] tails = new String[t.sortedIds.length];
        t.plainTokens = new long[(t.sortedIds.length + 63) >>> 6];
        for (int i = 0; i < tails.length; i++) {
            String text = texts[t.sortedIds[i]];
            int k = 0;
            while (k < text.length() && !special(text.charAt(k))) {
                k++;
            }
            if (k == text.length()) {
                t.plainTokens[i >>> 6] |= 1L << i;
            } else {
                tails[i] = text.substring(k);
            }
        }
        t.suffixes = buildOne(tails);
        return t;
    }

    private static TokenTrie buildOne(String[] texts) {
        List<Integer> ids = new ArrayList<>();
        List<Integer> none = new ArrayList<>();
        for (int id = 0; id < texts.length; id++) {
            if (texts[id] == null || texts[id].isEmpty()) {
                none.add(id);
            } else {
                ids.add(id);
            }
        }
        ids.sort(Comparator.comparing((Integer id) -> texts[id]).thenComparing(id -> id));
        int n = ids.size();
        int[] sorted = ids.stream().mapToInt(Integer::intValue).toArray();
        // node count: sum over tokens of (length - common prefix with the previous token)
        int nodes = 1;
        for (int i = 0; i < n; i++) {
            nodes += texts[sorted[i]].length() - (i == 0 ? 0 : commonPrefix(texts[sorted[i - 1]], texts[sorted[i]]));
        }
        char[] ch = new char[nodes];
        int[] end = new int[nodes], lo = new int[nodes], hi = new int[nodes], own = new int[nodes];
        long[] below = new long[nodes];
        int[] path = new int[1024]; // node index per depth on the current path
        int depth = 0, next = 1;
        path[0] = 0;
        lo[0] = 0;
        for (int i = 0; i < n; i++) {
            String t = texts[sorted[i]];
            int common = i == 0 ? 0 : commonPrefix(texts[sorted[i - 1]], t);
            while (depth > common) { // close nodes the previous token went through and this one does not
                close(path[depth--], next, i, end, hi);
            }
            if (t.length() >= path.length) {
                path = Arrays.copyOf(path, t.length() * 2);
            }
            for (int d = common; d < t.length(); d++) {
                int node = next++;
                ch[node] = t.charAt(d);
                lo[node] = i;
                path[++depth] = node;
            }
            own[path[depth]]++;
        }
        while (depth > 0) {
            close(path[depth--], next, n, end, hi);
        }
        end[0] = nodes;
        hi[0] = n;
        // children before parents: a node's bits cover its children's characters and their subtrees
        for (int node = nodes - 1; node >= 0; node--) {
            long b = 0;
            for (int c = node + 1; c < end[node]; c = end[c]) {
                b |= bit(ch[c]) | below[c];
            }
            below[node] = b;
        }
        int longest = ids.stream().mapToInt(id -> texts[id].length()).max().orElse(0);
        return new TokenTrie(ch, end, lo, hi, own, below, sorted, none.stream().mapToInt(Integer::intValue).toArray(), texts.length, longest);
    }

    private static void close(int node, int next, int tokenIndex, int[] end, int[] hi) {
        end[node] = next;
        hi[node] = tokenIndex;
    }

    private static int commonPrefix(String a, String b) {
        int k = 0, m = Math.min(a.length(), b.length());
        while (k < m && a.charAt(k) == b.charAt(k)) {
            k++;
        }
        return k;
    }

    /** Tokens in the vocabulary (with or without text). */
    public int vocabSize() {
        return vocab;
    }

    /** Tokens with text (the trie's tokens). */
    public int tokens() {
        return sortedIds.length;
    }

    /** Characters of the longest token text. */
    public int longest() {
        return longest;
    }

    public int nodes() {
        return ch.length;
    }

    /** Token id of sorted index {@code i}. */
    int tokenAt(int i) {
        return sortedIds[i];
    }

    /** Token ids without text (never allowed by a grammar). */
    int[] untexted() {
        return untexted;
    }

    /**
     * Marks in {@code allowed} (sorted-order bits) every token whose whole text {@code start}
     * accepts; returns how many. From a stable state (free text) the tokens without special
     * characters are accepted at once and only the others' tails are walked, from their first
     * special character on, in the suffix trie: inside a string, that is a few thousand nodes
     * instead of the whole vocabulary's paths to its quotes and newlines.
     */
    int walk(Recognizer start, long[] allowed) {
        long stable = start.stableExceptWithin();
        int budget = start.stableBudget();
        if (stable >= 0 && budget == Integer.MAX_VALUE && suffixes != null) {
            int count = 0;
            for (int w = 0; w < plainTokens.length; w++) {
                allowed[w] |= plainTokens[w];
                count += Long.bitCount(plainTokens[w]);
            }
            long[] tails = new long[(suffixes.tokens() + 63) >>> 6];
            suffixes.walkAll(start, stable, budget, tails);
            for (int w = 0; w < tails.length; w++) {
                for (long b = tails[w]; b != 0; b &= b - 1) {
                    int i = suffixes.tokenAt((w << 6) + Long.numberOfTrailingZeros(b));
                    allowed[i >>> 6] |= 1L << i;
                    count++;
                }
            }
            return count;
        }
        return walkAll(start, stable, budget, allowed);
    }

    private int walkAll(Recognizer start, long stable, int budget, long[] allowed) {
        int count = 0;
        boolean ascii = start.asciiNext();
        for (int c = 1; c < ch.length && !(ascii && ch[c] >= 0x80); c = end[c]) {
            count += visit(c, start, stable, budget, 0, allowed);
        }
        return count;
    }

    /**
     * @param parentStable the parent's {@link Recognizer#stableExceptWithin}, for {@code parentBudget} plain characters
     * @param skipped      plain characters the parent has absorbed without stepping (the real state is parent.skipPlain(skipped))
     */
    private int visit(int node, Recognizer parent, long parentStable, int parentBudget, int skipped, long[] allowed) {
        Recognizer s;
        long stable;
        int budget, here;
        char c = ch[node];
        int cost = Character.isLowSurrogate(c) ? 0 : 1; // budgets count code points: a pair's high half counts it
        if (parentStable >= 0 && (bit(c) & parentStable) == 0 && skipped + cost <= parentBudget) {
            s = parent; // a character the stable state ignores: same state, one more skipped
            stable = parentStable;
            budget = parentBudget;
            here = skipped + cost;
        } else {
            s = (skipped == 0 ? parent : parent.skipPlain(skipped)).step(c);
            if (s == null) {
                return 0;
            }
            stable = s.stableExceptWithin();
            budget = s.stableBudget();
            here = 0;
        }
        if (stable >= 0 && (below[node] & stable) == 0 && (budget == Integer.MAX_VALUE || here + height[node] <= budget)) {
            setRange(allowed, lo[node], hi[node]); // nothing below can change the state: all of it is accepted
            return hi[node] - lo[node];
        }
        int count = own[node];
        if (count > 0) {
            setRange(allowed, lo[node], lo[node] + count);
        }
        boolean ascii = stable < 0 && s.asciiNext(); // children are in character order: the ASCII ones come first
        for (int child = node + 1; child < end[node] && !(ascii && ch[child] >= 0x80); child = end[child]) {
            count += visit(child, s, stable, budget, here, allowed);
        }
        return count;
    }

    static void setRange(long[] bits, int from, int to) {
        if (from >= to) {
            return;
        }
        int w0 = from >>> 6, w1 = (to - 1) >>> 6;
        long first = -1L << from, last = -1L >>> -to;
        if (w0 == w1) {
            bits[w0] |= first & last;
            return;
        }
        bits[w0] |= first;
        for (int w = w0 + 1; w < w1; w++) {
            bits[w] = -1L;
        }
        bits[w1] |= last;
    }
}

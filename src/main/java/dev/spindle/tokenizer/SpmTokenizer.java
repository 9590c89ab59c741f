package dev.spindle.tokenizer;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * A SentencePiece-style vocabulary as a GGUF file gives it ({@code tokenizer.ggml.model = "llama"}: pieces, scores, token
 * types), tokenized as llama.cpp tokenizes it, so that a GGUF's text becomes the ids llama.cpp gives: special pieces
 * (control, user-defined, unknown; longest first) split the text first (control and unknown ones only where special tokens
 * are parsed); each remaining fragment, with a space before it where {@code addSpacePrefix} and it follows a special token
 * or begins the text, has its spaces written as U+2581 and is cut into UTF-8 characters; the adjacent pair whose
 * concatenation is a piece of the highest score is merged (ties: the leftmost) until none is; a symbol that is no piece is
 * written as its bytes' {@code <0xXX>} pieces, after undoing the merges that made it.
 */
public final class SpmTokenizer {
    /** GGUF token types. */
    public static final int NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6;
    private static final String SPACE = "\u2581";

    private final List<String> pieces;
    private final float[] scores;
    private final int[] types;
    private final boolean addSpacePrefix;
    private final Map<String, Integer> ids = new HashMap<>();
    private final int[] byteIds = new int[256];
    /** Control, user-defined and unknown pieces, longest first (llama.cpp's special-token cache order). */
    private final List<Integer> specials = new ArrayList<>();

    public SpmTokenizer(List<String> pieces, float[] scores, int[] types, boolean addSpacePrefix) {
        if (scores.length != pieces.size() || types.length != pieces.size()) {
            throw new TokenizerException("a GGUF vocabulary of " + pieces.size() + " pieces with " + scores.length + " scores and " + types.length + " types");
        }
        this.pieces = List.copyOf(pieces);
        this.scores = scores.clone();
        this.types = types.clone();
        this.addSpacePrefix = addSpacePrefix;
        java.util.Arrays.fill(byteIds, -1);
        for (int i = 0; i < pieces.size(); i++) {
            ids.putIfAbsent(pieces.get(i), i);
            if (types[i] == BYTE) {
                String p = pieces.get(i);
                if (p.length() == 6 && p.startsWith("<0x") && p.endsWith(">")) {
                    byteIds[Integer.parseInt(p.substring(3, 5), 16)] = i;
                }
            }
            if (types[i] == CONTROL || types[i] == USER_DEFINED || types[i] == UNKNOWN) {
                specials.add(i);
            }
        }
        // llama.cpp sorts by the pieces' byte lengths, longest first (a stable sort keeps id order among equals)
        specials.sort(Comparator.comparingInt((Integer i) -> -pieces.get(i).getBytes(StandardCharsets.UTF_8).length));
    }

    public int size() {
        return pieces.size();
    }

    public String piece(int id) {
        return pieces.get(id);
    }

    public int type(int id) {
        return types[id];
    }

    /** The id of a piece, or -1. */
    public int id(String piece) {
        return ids.getOrDefault(piece, -1);
    }

    /** A fragment of the text: raw text, or a special piece's id. */
    private record Fragment(String text, int token) {
    }

    /** Ids of {@code text}; special pieces in the text become their ids where {@code parseSpecial} (user-defined ones always). */
    public int[] encode(String text, boolean parseSpecial) {
        List<Fragment> fragments = new ArrayList<>();
        if (!text.isEmpty()) {
            fragments.add(new Fragment(text, -1));
        }
        for (int id : specials) {
            if (!parseSpecial && (types[id] == CONTROL || types[id] == UNKNOWN)) {
                continue;
            }
            String s = pieces.get(id);
            if (s.isEmpty()) {
                continue;
            }
            List<Fragment> next = new ArrayList<>();
            for (Fragment f : fragments) {
                if (f.token() >= 0) {
                    next.add(f);
                    continue;
                }
                String t = f.text();
                int from = 0;
                for (int at = t.indexOf(s); at >= 0; at = t.indexOf(s, from)) {
                    if (at > from) {
                        next.add(new Fragment(t.substring(from, at), -1));
                    }
                    next.add(new Fragment(null, id));
                    from = at + s.length();
                }
                if (from < t.length()) {
                    next.add(new Fragment(t.substring(from), -1));
                }
            }
            fragments = next;
        }
        List<Integer> out = new ArrayList<>();
        boolean prevSpecial = true;
        for (Fragment f : fragments) {
            if (f.token() >= 0) {
                out.add(f.token());
                prevSpecial = true;
                continue;
            }
            String t = (addSpacePrefix && prevSpecial ? " " : "") + f.text();
            session(t.replace(" ", SPACE), out);
            prevSpecial = false;
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    /** A symbol of the merge: bytes [start, start + n) of the fragment, linked to its neighbours. */
    private static final class Symbol {
        int start, n, prev, next;
    }

    private record Bigram(int left, int right, float score, int size) {
    }

    /** llama.cpp's SPM session over one fragment (spaces already U+2581), appending its ids. */
    private void session(String text, List<Integer> out) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        List<Symbol> symbols = new ArrayList<>();
        for (int offs = 0; offs < bytes.length; ) {
            int len = utf8Length(bytes[offs]);
            Symbol s = new Symbol();
            s.start = offs;
            s.n = Math.min(len, bytes.length - offs);
            offs += s.n;
            s.prev = symbols.size() - 1;
            s.next = offs == bytes.length ? -1 : symbols.size() + 1;
            symbols.add(s);
        }
        // the best score first; among equals the leftmost (llama.cpp's comparator)
        PriorityQueue<Bigram> queue = new PriorityQueue<>((a, b) -> a.score() != b.score() ? Float.compare(b.score(), a.score())
                : Integer.compare(a.left(), b.left()));
        Map<String, int[]> revMerge = new HashMap<>();
        for (int i = 1; i < symbols.size(); i++) {
            tryBigram(bytes, symbols, i - 1, i, queue, revMerge);
        }
        while (!queue.isEmpty()) {
            Bigram b = queue.poll();
            Symbol l = symbols.get(b.left()), r = symbols.get(b.right());
            if (l.n == 0 || r.n == 0 || l.n + r.n != b.size()) {
                continue;
            }
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) {
                symbols.get(r.next).prev = b.left();
            }
            tryBigram(bytes, symbols, l.prev, b.left(), queue, revMerge);
            tryBigram(bytes, symbols, b.left(), l.next, queue, revMerge);
        }
        for (int i = symbols.isEmpty() ? -1 : 0; i != -1; i = symbols.get(i).next) {
            resegment(bytes, symbols, symbols.get(i), revMerge, out);
        }
    }

    private void tryBigram(byte[] bytes, List<Symbol> symbols, int left, int right, PriorityQueue<Bigram> queue, Map<String, int[]> revMerge) {
        if (left == -1 || right == -1) {
            return;
        }
        Symbol l = symbols.get(left), r = symbols.get(right);
        String text = new String(bytes, l.start, l.n + r.n, StandardCharsets.UTF_8);
        Integer id = ids.get(text);
        if (id == null || !validUtf8(bytes, l.start, l.n + r.n)) {
            return;
        }
        queue.add(new Bigram(left, right, scores[id], l.n + r.n));
        revMerge.put(text, new int[]{left, right});
    }

    private void resegment(byte[] bytes, List<Symbol> symbols, Symbol s, Map<String, int[]> revMerge, List<Integer> out) {
        String text = validUtf8(bytes, s.start, s.n) ? new String(bytes, s.start, s.n, StandardCharsets.UTF_8) : null;
        Integer id = text == null ? null : ids.get(text);
        if (id != null) {
            out.add(id);
            return;
        }
        int[] p = text == null ? null : revMerge.get(text);
        if (p == null) {
            for (int j = 0; j < s.n; j++) {
                int b = byteIds[bytes[s.start + j] & 0xFF];
                if (b < 0) {
                    throw new TokenizerException("the GGUF vocabulary has no <0x" + String.format("%02X", bytes[s.start + j] & 0xFF) + "> piece for a byte of"
                            + " the text");
                }
                out.add(b);
            }
            return;
        }
        resegment(bytes, symbols, symbols.get(p[0]), revMerge, out);
        resegment(bytes, symbols, symbols.get(p[1]), revMerge, out);
    }

    /** llama.cpp's unicode_len_utf8: the sequence length its first byte announces (1 for a stray continuation byte). */
    private static int utf8Length(byte first) {
        int hi = (first & 0xFF) >> 4;
        return hi < 8 ? 1 : hi < 12 ? 1 : hi < 14 ? 2 : hi == 14 ? 3 : 4;
    }

    /** Whether bytes [start, start + n) decode as UTF-8 without replacement (a Java string of them round-trips). */
    private static boolean validUtf8(byte[] bytes, int start, int n) {
        return java.util.Arrays.equals(new String(bytes, start, n, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8), 0, n, bytes, start, start + n);
    }

    /** The text of ids: pieces with U+2581 as spaces, byte pieces as their bytes; special pieces kept unless skipped. */
    public String decode(int[] tokens, boolean skipSpecial) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (int id : tokens) {
            int t = types[id];
            if (skipSpecial && (t == CONTROL || t == UNKNOWN || t == UNUSED)) {
                continue;
            }
            String p = pieces.get(id);
            if (t == BYTE && p.length() == 6) {
                out.write(Integer.parseInt(p.substring(3, 5), 16));
            } else {
                out.writeBytes((t == NORMAL ? p.replace(SPACE, " ") : p).getBytes(StandardCharsets.UTF_8));
            }
        }
        String s = out.toString(StandardCharsets.UTF_8);
        return addSpacePrefix && s.startsWith(" ") ? s.substring(1) : s;
    }
}

package dev.spindle.tokenizer;

import java.util.Arrays;

/**
 * Turns a stream of generated ids into text deltas. Each step decodes a short window
 * twice (up to the last emitted token, and through the new one) and emits the
 * difference, holding text back while it ends in U+FFFD (a byte-fallback character
 * still incomplete). The window always starts at an already-emitted token, so
 * decoder steps that act on the start of a decode (Nanbeige strips one leading space)
 * act identically on both halves: the concatenation of all deltas equals decoding the
 * whole sequence at once.
 */
public final class IncrementalDetokenizer {
    private final Tokenizer tokenizer;
    private final boolean skipSpecialTokens;
    private int[] ids = new int[16];
    private int size;
    private int prefixOffset;
    private int readOffset;

    public IncrementalDetokenizer(Tokenizer tokenizer, boolean skipSpecialTokens) {
        this.tokenizer = tokenizer;
        this.skipSpecialTokens = skipSpecialTokens;
    }

    /** Adds one id; returns the text it completes (possibly empty). */
    public String next(int id) {
        if (size == ids.length) {
            ids = Arrays.copyOf(ids, size * 2);
        }
        ids[size++] = id;
        String prefix = tokenizer.decode(Arrays.copyOfRange(ids, prefixOffset, readOffset), skipSpecialTokens);
        String full = tokenizer.decode(Arrays.copyOfRange(ids, prefixOffset, size), skipSpecialTokens);
        if (full.length() > prefix.length() && !full.endsWith("\uFFFD") && full.startsWith(prefix)) {
            String delta = full.substring(prefix.length());
            prefixOffset = readOffset;
            readOffset = size;
            return delta;
        }
        return "";
    }

    /** Text held back at the end of the stream (an incomplete character decodes as U+FFFD, as a full decode would). */
    public String flush() {
        String prefix = tokenizer.decode(Arrays.copyOfRange(ids, prefixOffset, readOffset), skipSpecialTokens);
        String full = tokenizer.decode(Arrays.copyOfRange(ids, prefixOffset, size), skipSpecialTokens);
        prefixOffset = readOffset = size;
        return full.length() > prefix.length() && full.startsWith(prefix) ? full.substring(prefix.length()) : "";
    }
}

package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Path;

/**
 * The text each token id adds to the output, read from tokenizer.json (SentencePiece
 * style: {@code ▁} is a space; byte pieces {@code <0xNN>} are their character when ASCII).
 * Null where a token cannot take part in constrained text: special tokens, and byte
 * pieces of multi-byte characters.
 */
public final class TokenTexts {
    private final String[] texts;
    private volatile TokenTrie trie;

    private TokenTexts(String[] texts) {
        this.texts = texts;
    }

    /** Texts given directly (tests, benchmarks): per token id its text, or null. */
    public static TokenTexts of(String[] texts) {
        return new TokenTexts(texts.clone());
    }

    /** The trie of all texts, built on first use (about a second for 166K tokens) and shared by every grammar. */
    public TokenTrie trie() {
        TokenTrie t = trie;
        if (t == null) {
            synchronized (this) {
                t = trie;
                if (t == null) {
                    trie = t = TokenTrie.build(texts);
                }
            }
        }
        return t;
    }

    /** The texts of every id tokenizer.json names (the vocabulary size is its largest id + 1). */
    public static TokenTexts load(Path tokenizerJson) {
        return load(tokenizerJson, -1);
    }

    /** @param vocabSize the model's vocabulary size, or -1 for the largest id in the file + 1 */
    public static TokenTexts load(Path tokenizerJson, int modelVocab) {
        JsonNode root;
        try (var in = java.nio.file.Files.newInputStream(tokenizerJson)) {
            root = new ObjectMapper().readTree(tokenizerJson.toString().endsWith(".gz") ? new java.util.zip.GZIPInputStream(in) : in);
        } catch (IOException e) {
            throw new IllegalArgumentException(tokenizerJson + ": " + e.getMessage(), e);
        }
        int size = modelVocab;
        if (size < 0) {
            int max = -1;
            for (var it = root.path("model").path("vocab").elements(); it.hasNext(); ) {
                max = Math.max(max, it.next().asInt());
            }
            for (JsonNode a : root.path("added_tokens")) {
                max = Math.max(max, a.path("id").asInt());
            }
            size = max + 1;
        }
        final int vocabSize = size;
        String[] t = new String[vocabSize];
        root.path("model").path("vocab").fields().forEachRemaining(e -> {
            int id = e.getValue().asInt();
            if (id >= 0 && id < vocabSize) {
                t[id] = pieceText(e.getKey());
            }
        });
        for (JsonNode a : root.path("added_tokens")) {
            int id = a.path("id").asInt();
            if (id >= 0 && id < vocabSize) {
                t[id] = a.path("special").asBoolean(false) ? null : a.path("content").asText();
            }
        }
        return new TokenTexts(t);
    }

    /** A SentencePiece-style piece's text: U+2581 a space, a byte piece its character when ASCII (else null). */
    public static String pieceText(String piece) {
        if (piece.length() == 6 && piece.startsWith("<0x") && piece.endsWith(">")) {
            int b = Integer.parseInt(piece.substring(3, 5), 16);
            return b < 0x80 ? String.valueOf((char) b) : null;
        }
        return piece.replace('\u2581', ' ');
    }

    public int size() {
        return texts.length;
    }

    public String text(int id) {
        return texts[id];
    }
}

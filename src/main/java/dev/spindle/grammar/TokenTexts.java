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
        return of(root, modelVocab, tokenizerJson.toString());
    }

    /**
     * The texts of a tokenizer.json's ids: SentencePiece-style pieces ({@link #pieceText}), or byte-level ones (a ByteLevel
     * decoder: each character one byte of GPT-2's byte-to-unicode alphabet) decoded as UTF-8 where they are whole characters
     * (else null: such a token can only appear inside a longer text, which the grammar's byte view does not model).
     */
    public static TokenTexts of(JsonNode root, int modelVocab, String origin) {
        boolean byteLevel = root.path("decoder").path("type").asText("").equals("ByteLevel");
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
                t[id] = byteLevel ? byteLevelText(e.getKey()) : pieceText(e.getKey());
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

    private static final int[] BYTE_OF = byteAlphabetInverse();

    /** GPT-2's byte-to-unicode alphabet inverted: the byte each character stands for (-1 for others). */
    private static int[] byteAlphabetInverse() {
        int[] inv = new int[512];
        java.util.Arrays.fill(inv, -1);
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            inv[printable ? b : 256 + extra++] = b;
        }
        return inv;
    }

    /** A byte-level token's text: its bytes as UTF-8, or null where they are not whole characters. */
    public static String byteLevelText(String token) {
        byte[] bytes = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            char c = token.charAt(i);
            int b = c < BYTE_OF.length ? BYTE_OF[c] : -1;
            if (b < 0) {
                return token; // not a byte-level piece (an added token's text as it is)
            }
            bytes[i] = (byte) b;
        }
        try {
            return java.nio.charset.StandardCharsets.UTF_8.newDecoder().onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                    .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return null;
        }
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

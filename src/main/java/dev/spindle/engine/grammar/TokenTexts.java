package dev.spindle.engine.grammar;

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

    private TokenTexts(String[] texts) {
        this.texts = texts;
    }

    public static TokenTexts load(Path tokenizerJson, int vocabSize) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(tokenizerJson.toFile());
        } catch (IOException e) {
            throw new IllegalArgumentException(tokenizerJson + ": " + e.getMessage(), e);
        }
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

    private static String pieceText(String piece) {
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

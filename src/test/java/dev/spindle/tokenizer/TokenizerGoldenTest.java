package dev.spindle.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Spindle's ids and text against HF tokenizers' on a tokenizer in Nanbeige's exact
 * format (scripts/make_tokenizer.py): every golden encodes to HF's ids, decodes to
 * HF's text, and streams to the same text delta by delta.
 */
class TokenizerGoldenTest {
    static final Path DIR = Path.of("src/test/resources/tokenizer");
    static Tokenizer tok;
    static List<JsonNode> goldens = new ArrayList<>();

    @BeforeAll
    static void load() throws IOException {
        tok = Tokenizer.load(DIR);
        ObjectMapper m = new ObjectMapper();
        for (String line : Files.readAllLines(DIR.resolve("goldens.jsonl"))) {
            goldens.add(m.readTree(line));
        }
    }

    @AfterAll
    static void close() {
        tok.close();
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    @Test
    void idsMatchHf() {
        for (JsonNode g : goldens) {
            String text = g.get("text").asText();
            assertEquals(g.get("sanitized").asText(), Tokenizer.sanitize(text));
            assertArrayEquals(ints(g.get("ids")), tok.encode(text), () -> "ids of " + g.get("text"));
            assertArrayEquals(ints(g.get("ids_with_special")), tok.encodeWithSpecialTokens(text), () -> "ids with special tokens of " + g.get("text"));
        }
        System.out.printf("[tokenizer] %d goldens encode to HF's ids%n", goldens.size());
    }

    @Test
    void decodingMatchesHf() {
        for (JsonNode g : goldens) {
            int[] ids = ints(g.get("ids"));
            assertEquals(g.get("decoded").asText(), tok.decode(ids, false), () -> "decode of " + g.get("text"));
            assertEquals(g.get("decoded_skip_special").asText(), tok.decode(ids, true), () -> "decode (skip special) of " + g.get("text"));
        }
    }

    @Test
    void streamingDeltasConcatenateToTheFullDecode() {
        for (boolean skip : new boolean[]{false, true}) {
            for (JsonNode g : goldens) {
                int[] ids = ints(g.get("ids"));
                IncrementalDetokenizer d = new IncrementalDetokenizer(tok, skip);
                StringBuilder b = new StringBuilder();
                for (int id : ids) {
                    String delta = d.next(id);
                    assertTrue(!delta.contains("\uFFFD") || g.get("decoded").asText().contains("\uFFFD"), "no partial characters in deltas");
                    b.append(delta);
                }
                b.append(d.flush());
                String want = g.get(skip ? "decoded_skip_special" : "decoded").asText();
                assertEquals(want, b.toString(), () -> "streamed decode of " + g.get("text"));
            }
        }
    }

    @Test
    void addedTokensAreRecognisedInsideText() {
        int imStart = tok.addedTokenId("<|im_start|>");
        int think = tok.addedTokenId("<think>");
        assertTrue(imStart > 0 && think > 0);
        int[] ids = tok.encode("<|im_start|>assistant\n<think>\n");
        assertEquals(imStart, ids[0]);
        assertTrue(java.util.Arrays.stream(ids).anyMatch(i -> i == think));
        assertTrue(tok.isSpecial(imStart));
        assertTrue(!tok.isSpecial(think), "<think> is added but not special: skip-special-tokens keeps it");
        assertEquals("<think>x", tok.decode(tok.encode("<|im_end|><think>x"), true));
    }

    @Test
    void brokenTokenizerFilesAreNamed(@org.junit.jupiter.api.io.TempDir Path dir) throws IOException {
        TokenizerException missing = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertTrue(missing.getMessage().contains("tokenizer.json"));
        Files.writeString(dir.resolve("tokenizer.json"), "{\"model\": ");
        assertTrue(assertThrows(TokenizerException.class, () -> Tokenizer.load(dir)).getMessage().contains("not valid JSON"));
        Files.writeString(dir.resolve("tokenizer.json"), "{\"version\": \"1.0\", \"model\": {\"type\": \"Nonsense\"}}");
        assertTrue(assertThrows(TokenizerException.class, () -> Tokenizer.load(dir)).getMessage().contains("refused"));
    }
}

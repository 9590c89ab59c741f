package dev.spindle.model.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.tokenizer.SpmTokenizer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A GGUF's SentencePiece-style vocabulary (the bundled model's, as a vocabulary-only GGUF, with and without
 * add_space_prefix) tokenizes every text of the goldens to the ids llama.cpp's own llama-tokenize gave for the same file (src/test/resources/fixtures/gguf-vocab: the
 * kl corpus's texts, chat turns with special tokens, Chinese, code, emoji, runs of spaces), and decodes them back.
 */
class GgufTokenizerTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/gguf-vocab");

    static SpmTokenizer spm(GgufFile f) {
        List<String> pieces = new ArrayList<>();
        for (Object o : f.list("tokenizer.ggml.tokens").orElseThrow()) {
            pieces.add((String) o);
        }
        List<?> s = f.list("tokenizer.ggml.scores").orElseThrow(), t = f.list("tokenizer.ggml.token_type").orElseThrow();
        float[] scores = new float[s.size()];
        int[] types = new int[t.size()];
        for (int i = 0; i < scores.length; i++) {
            scores[i] = ((Double) s.get(i)).floatValue();
            types[i] = ((Long) t.get(i)).intValue();
        }
        boolean prefix = !(f.metadata().get("tokenizer.ggml.add_space_prefix") instanceof Boolean b) || b;
        return new SpmTokenizer(pieces, scores, types, prefix);
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"true", "false"})
    void textsTokenizeAsLlamaCppTokenizesThem(String prefix) throws IOException {
        try (GgufFile f = GgufFile.open(DIR.resolve("spindle-chat-target-vocab-prefix-" + prefix + ".gguf"))) {
            assertEquals("llama", f.string("tokenizer.ggml.model").orElseThrow());
            SpmTokenizer tok = spm(f);
            int n = 0;
            for (String line : Files.readAllLines(DIR.resolve("llama-tokenize-prefix-" + prefix + ".jsonl"))) {
                JsonNode g = new ObjectMapper().readTree(line);
                String text = g.get("text").asText();
                int[] want = new int[g.get("ids").size()];
                for (int i = 0; i < want.length; i++) {
                    want[i] = g.get("ids").get(i).asInt();
                }
                int[] got = tok.encode(text, true);
                if (!Arrays.equals(want, got)) {
                    throw new AssertionError("text " + n + " " + new ObjectMapper().writeValueAsString(text) + ": llama.cpp " + Arrays.toString(want)
                            + ", Spindle " + Arrays.toString(got));
                }
                n++;
            }
            assertTrue(n > 50, n + " goldens");
            String s = "Hello world, 你好 🎉";
            assertEquals(s, tok.decode(tok.encode(s, true), false));
        }
    }
}

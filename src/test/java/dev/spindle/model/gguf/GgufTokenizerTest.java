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

    /** A text and the ids llama.cpp's llama-tokenize gave for it. */
    record Golden(String text, int[] ids) {
    }

    /** The goldens of a fixture file (one JSON object a line). */
    static List<Golden> goldens(String file) throws IOException {
        List<Golden> out = new ArrayList<>();
        for (String line : Files.readAllLines(DIR.resolve(file))) {
            JsonNode g = new ObjectMapper().readTree(line);
            int[] ids = new int[g.get("ids").size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = g.get("ids").get(i).asInt();
            }
            out.add(new Golden(g.get("text").asText(), ids));
        }
        return out;
    }

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
            for (Golden g : goldens("llama-tokenize-prefix-" + prefix + ".jsonl")) {
                String text = g.text();
                int[] want = g.ids();
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

    /**
     * gpt2-style (byte-level BPE) vocabularies with the gpt-2, llama-bpe and qwen2 pre-tokenizers (scripts/make_gguf_bpe_vocab.py):
     * every text tokenizes to llama.cpp's ids for the same file, decodes back to itself, and the tokens' texts for grammars
     * are their bytes as UTF-8.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"gpt-2", "llama-bpe", "qwen2"})
    void gpt2StyleVocabulariesTokenizeAsLlamaCppTokenizesThem(String pre) throws IOException {
        Path file = DIR.resolve("bpe-" + pre + ".gguf");
        try (dev.spindle.tokenizer.Tokenizer tok = dev.spindle.wiring.ModelFiles.tokenizer(file)) {
            int n = 0;
            for (Golden g : goldens("llama-tokenize-bpe-" + pre + ".jsonl")) {
                String text = g.text();
                int[] want = g.ids();
                int[] got = tok.encode(text);
                if (!Arrays.equals(want, got)) {
                    throw new AssertionError(pre + " text " + n + " " + new ObjectMapper().writeValueAsString(text) + ": llama.cpp " + Arrays.toString(want)
                            + ", Spindle " + Arrays.toString(got));
                }
                assertEquals(text, tok.decode(got, false), pre + " text " + n + " decodes back");
                n++;
            }
            assertTrue(n > 50, n + " goldens");
            int bos = tok.addedTokenId("<|begin_of_text|>");
            int[] withBos = tok.encodeWithSpecialTokens("Hi");
            assertEquals(pre.equals("llama-bpe"), withBos[0] == bos, "a BOS first where the file says add_bos_token");
            assertTrue(tok.isSpecial(tok.addedTokenId("<|im_end|>")));
            assertTrue(!tok.isSpecial(tok.addedTokenId("<think>")));
            var texts = dev.spindle.wiring.ModelFiles.tokenTexts(file, tok, 1762);
            int the = tok.encode(" the")[0];
            assertEquals(" the", texts.text(the));
            assertEquals("<think>", texts.text(tok.addedTokenId("<think>")));
            assertEquals(null, texts.text(tok.addedTokenId("<|im_end|>")));
        }
        try (GgufFile f = GgufFile.open(file)) {
            assertEquals("gpt2", f.string("tokenizer.ggml.model").orElseThrow());
        }
        dev.spindle.tokenizer.TokenizerException e = org.junit.jupiter.api.Assertions.assertThrows(dev.spindle.tokenizer.TokenizerException.class,
                () -> dev.spindle.tokenizer.GgufBpe.tokenizerJson(List.of("a"), new int[]{1}, List.of(), "falcon", "f.gguf"));
        assertTrue(e.getMessage().contains("tokenizer.ggml.pre is 'falcon'"), e.getMessage());
    }
}

package dev.spindle.grammar;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.Trials;
import dev.spindle.chat.ToolCallRecognizer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The trie walk's mask equals the plain definition, token by token: a token is allowed
 * exactly when the grammar accepts its whole text from the current state (and an end of
 * sequence exactly when the text so far is complete), for random vocabularies over the
 * characters grammars treat specially, random grammars and random reachable states.
 */
class TokenTrieMaskTest {
    static final String ALPHABET = "ab{}[]:,\"\\< >/=_-.0123456789\n\t\r etrufnlsOLpamit中文é€\u0001";
    static final String[] PIECES = {"<tool_call>", "</tool_call>", "<function=", "get_weather", "</function>", "<parameter=", "city",
            "</parameter>", "Oslo", "Lima", "</think>", "{\"", "\":", "\", \"", "\"}", "true", "null", "12", "\n\n", "    ", "\\n", "\\u00e9"};

    /** A token's text: 1-6 characters of the alphabet, one of the pieces, or up to three pieces joined. */
    static String token(RandomGenerator r) {
        return switch (Trials.frequency(r, 5, 2, 1)) {
            case 0 -> {
                char[] cs = new char[Trials.between(r, 1, 6)];
                for (int i = 0; i < cs.length; i++) {
                    cs[i] = ALPHABET.charAt(r.nextInt(ALPHABET.length()));
                }
                yield new String(cs);
            }
            case 1 -> Trials.oneOf(r, PIECES);
            default -> String.join("", Trials.listOf(r, 1, 3, g -> Trials.oneOf(g, PIECES)));
        };
    }

    /** A vocabulary of 1-400 tokens (repeats allowed), one of the five grammars, and the seed of the walk's choices. */
    record Walk(List<String> vocab, int which, long seed) {
    }

    static Walk walk(RandomGenerator r) {
        return new Walk(Trials.listOf(r, 1, 400, TokenTrieMaskTest::token), r.nextInt(5), r.nextLong());
    }

    static Recognizer grammar(int which) throws Exception {
        ObjectMapper json = new ObjectMapper();
        Schema weather = Schema.compile(json.readTree("""
                {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Lima"]}, "days": {"type": "integer"},
                 "note": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}, "required": ["city"]}"""));
        Map<String, Schema> tools = new LinkedHashMap<>();
        tools.put("get_weather", weather);
        tools.put("get_time", Schema.compile(json.readTree("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}")));
        return switch (which) {
            case 0 -> JsonRecognizer.start(weather);
            case 1 -> JsonRecognizer.start(Schema.any());
            case 2 -> ToolCallRecognizer.forced(tools, true);
            case 3 -> ToolCallRecognizer.lazy(tools, false);
            default -> EitherRecognizer.of(ToolCallRecognizer.forced(tools, false), JsonRecognizer.start(Schema.anyObject()));
        };
    }

    @Test
    void walkEqualsTokenByTokenFeeding() {
        Trials.forAll(400, TokenTrieMaskTest::walk, w -> walkEqualsTokenByTokenFeeding(w.vocab(), w.which(), w.seed()));
    }

    static void walkEqualsTokenByTokenFeeding(List<String> vocab, int which, long seed) throws Exception {
        // every printable ASCII character, newline and tab are tokens too, so that a live state always has a next token
        List<String> all = new ArrayList<>(vocab);
        for (char ch = 0x20; ch < 0x7f; ch++) {
            all.add(String.valueOf(ch));
        }
        all.add("\n");
        all.add("\t");
        String[] texts = new String[all.size() + 2];
        for (int i = 0; i < all.size(); i++) {
            texts[i] = all.get(i);
        }
        int eos = all.size(); // a special token: no text
        TokenTexts tt = TokenTexts.of(texts);
        Recognizer state = grammar(which);
        GrammarConstraint c = new GrammarConstraint(state, tt, Set.of(eos), -1);
        Random rnd = new Random(seed);
        for (int step = 0; step < 40; step++) {
            float[] logits = new float[texts.length];
            c.mask(logits);
            List<Integer> allowed = new ArrayList<>();
            for (int id = 0; id < texts.length; id++) {
                if (id != eos && texts[id] != null && state.feed(texts[id]) != null) {
                    allowed.add(id);
                }
            }
            for (int id = 0; id < texts.length; id++) {
                // when nothing fits at all, the constraint lets the sequence end rather than sample garbage;
                // free text a lazy grammar only watches is not masked
                boolean expect = c.unmasked() || (id == eos ? state.accepting() || allowed.isEmpty() : allowed.contains(id));
                assertEquals(expect, logits[id] != Float.NEGATIVE_INFINITY, "token " + id + " '" + texts[id] + "' at step " + step);
            }
            if (c.unmasked()) {
                assertTrue(state.freeText(), "only free text goes unmasked");
            }
            assertTrue(!allowed.isEmpty() || state.accepting(), "a dead end: no token continues an incomplete text at step " + step);
            if (allowed.isEmpty()) {
                return;
            }
            int t = allowed.get(rnd.nextInt(allowed.size()));
            c.accept(t);
            state = state.feed(texts[t]);
        }
    }
}

package dev.spindle.engine.grammar;

import com.fasterxml.jackson.databind.ObjectMapper;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

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

    @Provide
    Arbitrary<String> token() {
        Arbitrary<String> random = Arbitraries.strings().withChars(ALPHABET.toCharArray()).ofMinLength(1).ofMaxLength(6);
        Arbitrary<String> piece = Arbitraries.of(PIECES);
        Arbitrary<String> joined = Arbitraries.of(PIECES).list().ofMinSize(1).ofMaxSize(3).map(l -> String.join("", l));
        return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(5, random), net.jqwik.api.Tuple.of(2, piece), net.jqwik.api.Tuple.of(1, joined));
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

    @Property(tries = 400)
    void walkEqualsTokenByTokenFeeding(@ForAll("vocab") List<String> vocab, @ForAll("grammars") int which, @ForAll("seeds") long seed) throws Exception {
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

    @Provide
    Arbitrary<List<String>> vocab() {
        return token().list().ofMinSize(1).ofMaxSize(400);
    }

    @Provide
    Arbitrary<Integer> grammars() {
        return Arbitraries.integers().between(0, 4);
    }

    @Provide
    Arbitrary<Long> seeds() {
        return Arbitraries.longs();
    }
}

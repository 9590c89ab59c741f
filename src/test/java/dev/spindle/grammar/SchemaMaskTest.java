package dev.spindle.grammar;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Under the rules added to schemas (string automata and lengths, numeric bounds, references),
 * the trie walk's mask still equals the plain definition (a token is allowed exactly when the
 * grammar takes its whole text), stable and mask-equivalent states included, and no reachable
 * state is a dead end. Seeded per trial ({@link Trials}: {@code -Dspindle.seed=N} replays one).
 */
class SchemaMaskTest {
    static final String ALPHABET = "ab{}[]:,\"\\ -.0123456789\n etrufnlAZT@xé\uD83D\uDE00";
    static final String[] PIECES = {"{\"", "\":", "\", \"", "\"}", "true", "null", "12", "0.5", "-3", "\\n", "\\u00e9", "\\ud83d\\ude00", "name",
            "code", "AB-12", "2024-01-31", "T10:00:00Z", "abcdefghij", "  ", "\"note\": \"", "\"n\": ", "\"next\": "};
    static final String SCHEMA = """
            {"type": "object", "properties": {"note": {"type": "string", "maxLength": 60}, "code": {"type": "string", "pattern": "^[A-Z]{2}-\\\\d+$"},
             "n": {"type": "number", "minimum": -5, "exclusiveMaximum": 12.5}, "day": {"type": "string", "format": "date"},
             "e": {"enum": ["a", 0.5, null]}, "s": {"type": "string", "minLength": 2, "maxLength": 4},
             "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["n"], "additionalProperties": false}""";

    @Test
    void masksMatchTokenByTokenFeeding() {
        Schema schema = SchemaTesting.strict(SCHEMA);
        Trials.run(60, rnd -> trial(schema, rnd));
    }

    private static void trial(Schema schema, SplittableRandom rnd) {
        List<String> all = new ArrayList<>();
        int[] cps = ALPHABET.codePoints().toArray();
        for (int i = 0; i < 150; i++) {
            if (rnd.nextInt(3) == 0) {
                all.add(PIECES[rnd.nextInt(PIECES.length)]);
            } else {
                StringBuilder b = new StringBuilder();
                for (int k = 0, n = 1 + rnd.nextInt(5); k < n; k++) {
                    b.appendCodePoint(cps[rnd.nextInt(cps.length)]);
                }
                all.add(b.toString());
            }
        }
        for (char ch = 0x20; ch < 0x7f; ch++) {
            all.add(String.valueOf(ch));
        }
        all.add("\n");
        String[] texts = new String[all.size() + 1];
        for (int i = 0; i < all.size(); i++) {
            texts[i] = all.get(i);
        }
        int eos = all.size();
        TokenTexts tt = TokenTexts.of(texts);
        Recognizer state = JsonRecognizer.start(schema);
        GrammarConstraint c = new GrammarConstraint(state, tt, Set.of(eos), -1);
        for (int step = 0; step < 80; step++) {
            float[] logits = new float[texts.length];
            c.mask(logits);
            List<Integer> allowed = new ArrayList<>();
            for (int id = 0; id < eos; id++) {
                if (state.feed(texts[id]) != null) {
                    allowed.add(id);
                }
            }
            for (int id = 0; id < texts.length; id++) {
                boolean expect = id == eos ? state.accepting() || allowed.isEmpty() : allowed.contains(id);
                assertEquals(expect, logits[id] != Float.NEGATIVE_INFINITY, "token " + id + " '" + texts[id] + "' at step " + step);
            }
            assertTrue(!allowed.isEmpty() || state.accepting(), "a dead end at step " + step);
            if (allowed.isEmpty() || state.accepting() && rnd.nextInt(4) == 0) {
                return;
            }
            int pick = allowed.get(rnd.nextInt(allowed.size()));
            c.accept(pick);
            state = state.feed(texts[pick]);
        }
    }
}

package dev.spindle.sample;

import dev.spindle.Trials;
import dev.spindle.sample.TokenRules;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * vLLM's token rules as a mask, against a direct reading of their definitions: a token is masked
 * exactly when it is outside allowed_token_ids, or would complete a bad word given the output so
 * far, or is an end token before min_tokens (unless masking the ends would leave nothing).
 */
class TokenRulesPropertyTest {
    static final int VOCAB = 12;
    static final Set<Integer> ENDS = Set.of(0, 1);

    /** The output so far, the bad words, allowed_token_ids (null: any), min_tokens and the prompt's length. */
    record Case(int[] out, List<int[]> words, int[] allowed, int minTokens, int promptLength) {
    }

    static Case generate(RandomGenerator r) {
        return new Case(Trials.ints(r, 0, 8, 0, VOCAB - 1), Trials.listOf(r, 0, 4, g -> Trials.ints(g, 1, 3, 0, VOCAB - 1)),
                r.nextBoolean() ? null : Trials.ints(r, 1, 6, 0, VOCAB - 1), Trials.between(r, 0, 10), Trials.between(r, 0, 3));
    }

    @Test
    void masksExactlyWhatTheRulesForbid() {
        Trials.forAll(2000, TokenRulesPropertyTest::generate, TokenRulesPropertyTest::masksExactlyWhatTheRulesForbid);
    }

    static void masksExactlyWhatTheRulesForbid(Case c) {
        int[] out = c.out(), allowed = c.allowed();
        List<int[]> words = c.words();
        int minTokens = c.minTokens(), promptLength = c.promptLength();
        int[] tokens = new int[promptLength + out.length];
        Arrays.fill(tokens, 0, promptLength, 7); // the prompt never counts as output
        System.arraycopy(out, 0, tokens, promptLength, out.length);
        TokenRules rules = new TokenRules(minTokens, allowed, words);
        float[] row = new float[VOCAB];
        Arrays.fill(row, 1f);
        rules.apply(row, tokens, promptLength, out.length, ENDS);
        List<Integer> expectedMasked = new ArrayList<>();
        boolean[] other = new boolean[VOCAB];
        for (int id = 0; id < VOCAB; id++) {
            int token = id;
            boolean masked = allowed != null && Arrays.stream(allowed).noneMatch(a -> a == token);
            for (int[] w : words) {
                int prefix = w.length - 1;
                if (w[prefix] == id && prefix <= out.length
                        && Arrays.equals(Arrays.copyOfRange(out, out.length - prefix, out.length), Arrays.copyOf(w, prefix))) {
                    masked = true;
                }
            }
            other[id] = masked;
        }
        boolean anyLeft = false;
        for (int id = 0; id < VOCAB; id++) {
            anyLeft |= !other[id] && !(out.length < minTokens && ENDS.contains(id));
        }
        for (int id = 0; id < VOCAB; id++) {
            boolean masked = other[id] || (out.length < minTokens && anyLeft && ENDS.contains(id));
            if (masked) {
                expectedMasked.add(id);
            }
            assertEquals(masked, row[id] == Float.NEGATIVE_INFINITY, "token " + id + " with output " + Arrays.toString(out) + ", words "
                    + words.stream().map(Arrays::toString).toList() + ", allowed " + Arrays.toString(allowed) + ", min " + minTokens);
        }
        assertTrue(rules.active(out.length) || expectedMasked.isEmpty(), "an inactive rule masks nothing");
    }
}

package dev.spindle.engine.speculative;

import dev.spindle.Trials;
import dev.spindle.step.Proposal;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NgramProposerTest {
    @Test
    void proposesWhatFollowedTheMostRecentEarlierOccurrenceOfTheLongestSuffix() {
        NgramProposer p = new NgramProposer(1, 3, 0);
        //            0  1  2  3  4  5  6  7  8  9
        int[] t = {5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 6, 7};
        // suffix (6, 7) of length 2... the longest that occurred before is (6, 7) at 1..2 and 5..6 (n = 3: (2, 6, 7) never occurred)
        assertArrayEquals(new int[]{1, 2}, p.lookup(t, t.length, 2), "the most recent earlier occurrence (ending at 7) wins");
        assertArrayEquals(new int[]{1, 2, 6, 7}, p.lookup(t, t.length, 9), "up to the end of the text");
        assertArrayEquals(new int[0], p.lookup(new int[]{1, 2, 3, 4}, 4, 3), "no repeat, no draft");
    }

    @Test
    void theWindowBoundsTheSearch() {
        int[] t = {9, 9, 1, 2, 3, 4, 5, 6, 9};
        assertArrayEquals(new int[]{1}, new NgramProposer(1, 1, 0).lookup(t, t.length, 1), "what followed the 9 at index 1");
        assertArrayEquals(new int[0], new NgramProposer(1, 1, 6).lookup(t, t.length, 1), "9 occurs only outside the last 6 tokens");
    }

    @Test
    void batchesAreAnsweredInOrder() {
        NgramProposer p = new NgramProposer(1, 2, 0);
        List<Proposal> out = p.propose(List.of(new DraftRequest(1, new int[]{1, 2, 1}, 3, 4), new DraftRequest(2, new int[]{3, 4}, 2, 4)));
        assertArrayEquals(new int[]{2, 1}, out.get(0).tokens());
        assertTrue(out.get(1).isEmpty());
    }

    /** A text of 1-60 tokens over 4 values (so that n-grams repeat), the smallest n 1-3, the largest n - smallest 0-3, k 1-6. */
    record Lookup(int[] text, int min, int extra, int k) {
    }

    static Lookup lookup(RandomGenerator r) {
        return new Lookup(Trials.ints(r, 1, 60, 0, 3), Trials.between(r, 1, 3), Trials.between(r, 0, 3), Trials.between(r, 1, 6));
    }

    /** Whatever it proposes followed an earlier occurrence of the text's last n tokens (n >= min), and is at most k long. */
    @Test
    void aProposalContinuesAnEarlierOccurrenceOfTheSuffix() {
        Trials.forAll(300, NgramProposerTest::lookup, NgramProposerTest::aProposalContinuesAnEarlierOccurrenceOfTheSuffix);
    }

    static void aProposalContinuesAnEarlierOccurrenceOfTheSuffix(Lookup l) {
        int[] t = l.text();
        int min = l.min(), extra = l.extra(), k = l.k();
        int[] d = new NgramProposer(min, min + extra, 0).lookup(t, t.length, k);
        assertTrue(d.length <= k);
        if (d.length == 0) {
            return;
        }
        boolean found = false;
        for (int e = t.length - 1; e >= min && !found; e--) {
            boolean suffix = Arrays.equals(t, e - min, e, t, t.length - min, t.length);
            found = suffix && Arrays.equals(d, Arrays.copyOfRange(t, e, Math.min(t.length, e + d.length)));
        }
        assertTrue(found, "the draft " + Arrays.toString(d) + " continues no earlier occurrence of the last " + min + " tokens of " + Arrays.toString(t));
    }

    @Test
    void aPacerPausesLongerAfterEachMissAndResumesAfterAnAcceptedDraft() {
        DraftPacer p = new DraftPacer(4);
        assertEquals(4, p.next(0));
        int drafting = 0, steps = 2000;
        for (int s = 0; s < steps; s++) {
            int k = p.next(s);
            if (k > 0) {
                drafting++;
                p.record(s, k, 0);
            }
        }
        assertTrue(drafting <= steps / DraftPacer.MAX_PAUSE + 6, "drafts that always fail probe about every " + DraftPacer.MAX_PAUSE + " steps: " + drafting);
        // a single miss is no reason to pause
        DraftPacer q = new DraftPacer(4);
        q.record(10, 4, 0);
        assertTrue(q.next(11) > 0);
        q.record(13, 4, 0);
        assertEquals(0, q.next(14), "two misses in a row pause until the next multiple of 4");
        assertEquals(1, q.next(16), "the window that ends a pause is a one-token probe");
        q.record(16, 1, 1); // an accepted draft ends the pause sequence; partial acceptance shortens the drafts
        for (int i = 0; i < 6; i++) {
            q.record(17 + i, 4, 1);
        }
        assertEquals(2, q.next(30), "about one more than the accepted length");
        q.record(30, 2, 2);
        assertTrue(q.next(31) >= 3, "a fully accepted window lets the next grow");
    }

    @Test
    void pausedSequencesProbeInTheSameSteps() {
        DraftPacer a = new DraftPacer(4), b = new DraftPacer(4);
        for (long s = 0; s < 1000; s++) {
            boolean pa = a.next(s) > 0, pb = s >= 37 && b.next(s) > 0; // b starts later
            if (pa) {
                a.record(s, 4, 0);
            }
            if (pb) {
                b.record(s, 4, 0);
            }
            if (s >= 256) {
                assertEquals(pa, pb, "step " + s);
                assertEquals(pa, s % DraftPacer.MAX_PAUSE == 0, "probes on multiples of the longest pause, step " + s);
            }
        }
    }
}

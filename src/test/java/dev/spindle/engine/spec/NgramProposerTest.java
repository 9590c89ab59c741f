package dev.spindle.engine.spec;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;

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

    /** Whatever it proposes followed an earlier occurrence of the text's last n tokens (n >= min), and is at most k long. */
    @Property(tries = 300)
    void aProposalContinuesAnEarlierOccurrenceOfTheSuffix(@ForAll @Size(min = 1, max = 60) List<@IntRange(min = 0, max = 3) Integer> text,
                                                          @ForAll @IntRange(min = 1, max = 3) int min, @ForAll @IntRange(min = 0, max = 3) int extra,
                                                          @ForAll @IntRange(min = 1, max = 6) int k) {
        int[] t = text.stream().mapToInt(Integer::intValue).toArray();
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
        assertEquals(4, p.next());
        int drafting = 0, steps = 2000;
        for (int s = 0; s < steps; s++) {
            int k = p.next();
            if (k > 0) {
                drafting++;
                p.record(k, 0);
            }
        }
        assertTrue(drafting <= steps / DraftPacer.MAX_PAUSE + 8, "drafts that always fail probe about every " + DraftPacer.MAX_PAUSE + " steps: " + drafting);
        // an accepted draft ends the pause sequence; partial acceptance shortens the drafts
        while (p.next() == 0) {
            // wait out the pause
        }
        p.record(1, 1);
        assertTrue(p.next() >= 1);
        for (int i = 0; i < 6; i++) {
            p.record(4, 1);
        }
        assertEquals(2, p.next(), "about one more than the accepted length");
        p.record(2, 2);
        assertTrue(p.next() >= 2);
    }
}

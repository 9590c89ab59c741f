package dev.spindle.backend.cuda;

import dev.spindle.backend.KeySplits;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.step.ModelStep.Window;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Which steps replay a captured graph, and with how many split slots a row (GraphKeys.splits), on the host: the
 * split bucket of the power of two of keys at or above the longest row's, and no graph for a prefill window, a window
 * without logits, more logit rows than the head takes in one pass, or a bucket that would give the rows too many slots.
 */
class GraphSplitsTest {
    private final BlockPool pool = new BlockPool(200_000, 16);

    private Window decodeRowAt(int context) {
        BlockTable t = new BlockTable(pool);
        t.reserve(context + 1);
        t.advance(context);
        return StepPlanTest.w(new int[]{7}, t, false, true);
    }

    private static int bucketOf(int keys) {
        return KeySplits.count(Integer.bitCount(keys) == 1 ? keys : Integer.highestOneBit(keys) << 1);
    }

    @Test
    void decodeRowsTakeTheBucketOfTheirLongestContext() {
        assertEquals(bucketOf(KeySplits.MIN), GraphKeys.splits(List.of(decodeRowAt(0)), 64));
        assertEquals(bucketOf(1024), GraphKeys.splits(List.of(decodeRowAt(1000)), 64));
        // a row at position 1023 reads 1,024 keys: a power of two, its own bucket; one more key takes the next
        assertEquals(bucketOf(1024), GraphKeys.splits(List.of(decodeRowAt(1023)), 64));
        assertEquals(bucketOf(2048), GraphKeys.splits(List.of(decodeRowAt(1024)), 64));
        assertEquals(bucketOf(65536), GraphKeys.splits(List.of(decodeRowAt(100), decodeRowAt(40000), decodeRowAt(5)), 64));
        // so steps of one batch size over a growing context share few graphs: one per power of two
        assertEquals(GraphKeys.splits(List.of(decodeRowAt(20000)), 64), GraphKeys.splits(List.of(decodeRowAt(30000)), 64));
    }

    @Test
    void drafterWindowsOfFewRowsAreDecodeRowsToo() {
        BlockTable t = new BlockTable(pool);
        t.reserve(3000);
        t.advance(2990);
        Window verified = StepPlanTest.w(new int[StepPlan.ROWWISE_ROWS], t, true, true);
        assertEquals(bucketOf(2990 + StepPlan.ROWWISE_ROWS), GraphKeys.splits(List.of(verified, decodeRowAt(10)), 64));
    }

    @Test
    void prefillWindowsAndWindowsWithoutLogitsRunWithoutAGraph() {
        BlockTable t = new BlockTable(pool);
        Window prompt = StepPlanTest.w(new int[StepPlan.ROWWISE_ROWS + 1], t, false, true);
        assertEquals(0, GraphKeys.splits(List.of(decodeRowAt(100), prompt), 64));
        BlockTable u = new BlockTable(pool);
        Window chunk = StepPlanTest.w(new int[4], u, false, false);
        assertEquals(0, GraphKeys.splits(List.of(decodeRowAt(100), chunk), 64));
    }

    @Test
    void moreLogitRowsThanTheHeadTakesAtOnceRunWithoutAGraph() {
        List<Window> rows = new ArrayList<>();
        for (int i = 0; i < 9; i++) {
            rows.add(decodeRowAt(100 + i));
        }
        assertEquals(bucketOf(128), GraphKeys.splits(rows, 9));
        assertEquals(0, GraphKeys.splits(rows, 8));
    }

    @Test
    void manyRowsBesideOneLongContextWouldTakeTooManySlots() {
        // every row of a graph gets the bucket's slots: at 512K keys' bucket GraphKeys.MAX_PARTIALS / bucket rows fit, one more does not
        int longest = 512 * 1024 - 1;
        int bucket = bucketOf(longest + 1);
        List<Window> few = new ArrayList<>(), many = new ArrayList<>();
        few.add(decodeRowAt(longest));
        many.add(decodeRowAt(longest));
        int fit = (int) (GraphKeys.MAX_PARTIALS / bucket);
        for (int i = 1; i < fit; i++) {
            few.add(decodeRowAt(3));
        }
        for (int i = 1; i <= fit; i++) {
            many.add(decodeRowAt(3));
        }
        assertEquals(bucket, GraphKeys.splits(few, 1 << 20));
        assertEquals(0, GraphKeys.splits(many, 1 << 20));
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.KeySplits;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.ModelStep;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The integers of a GPU step, checked on the host (no GPU needed): rows, positions and KV slots
 * through the block tables, decode rows' split CTAs (every split of a row exactly once, slots in
 * split order), prefill tiles covering every row once, the logit rows, and the fixed layout a
 * captured graph relies on.
 */
class StepPlanTest {
    static final int SPLIT = KeySplits.MIN;
    final BlockPool pool = new BlockPool(8192, 16);

    /** A window at the table's end (blocks reserved): logits of all rows, the last, or none. */
    static Window w(int[] tokens, BlockTable t, boolean all, boolean want) {
        t.reserve(t.tokens() + tokens.length);
        int[] rows = !want ? ModelStep.noRows() : all ? ModelStep.allRows(tokens.length) : ModelStep.lastRow(tokens.length);
        return new Window(tokens, t.tokens(), t, rows, null);
    }

    BlockTable table(int written) {
        BlockTable t = new BlockTable(pool);
        t.reserve(written + 1);
        t.advance(written);
        return t;
    }

    static int[] desc(StepPlan p, int i) {
        int[] d = new int[8];
        System.arraycopy(p.data, p.desc + 8 * i, d, 0, 8);
        return d;
    }

    @Test
    void fedWindowsGetPairsOfTokenSlotAndPreviousRowAfterTheTables() {
        BlockTable a = table(40), b = table(0), c = table(900);
        List<Window> ws = List.of(w(new int[]{0}, a, false, true), w(new int[]{4, 5, 6}, b, false, true), w(new int[]{0}, c, false, true));
        StepPlan plain = new StepPlan(ws, 7, 8, 0, 64);
        StepPlan fed = new StepPlan(ws, 7, 8, 0, 64, new int[]{2, -1, 0});
        assertEquals(0, plain.feeds);
        assertEquals(plain.data.length, plain.feedAt, "no pairs without fed windows");
        assertEquals(2, fed.feeds);
        assertEquals(fed.data.length, fed.feedAt + 4);
        // window 0's token slot (row 0) from the previous step's row 2; window 2's (row 4) from row 0
        assertEquals(List.of(fed.tokens, 2, fed.tokens + 4, 0),
                List.of(fed.data[fed.feedAt], fed.data[fed.feedAt + 1], fed.data[fed.feedAt + 2], fed.data[fed.feedAt + 3]));
        // everything before the pairs is the plan without them (a captured graph's offsets do not move)
        assertEquals(java.util.Arrays.toString(plain.data), java.util.Arrays.toString(java.util.Arrays.copyOf(fed.data, fed.feedAt)));
    }

    @Test
    void rowsPositionsAndSlotsFollowTheTables() {
        BlockTable a = table(0), b = table(700);
        List<Window> ws = List.of(w(new int[]{5, 6, 7}, a, false, true), w(new int[]{9}, b, false, true));
        a.reserve(3);
        StepPlan p = new StepPlan(ws, 7, 8);
        assertEquals(4, p.rows);
        int[] pos = {0, 1, 2, 700};
        BlockTable[] owner = {a, a, a, b};
        for (int r = 0; r < 4; r++) {
            assertEquals(pos[r], p.data[p.positions + r]);
            assertEquals(owner[r].block(pos[r] / 16) * 16 + pos[r] % 16, p.data[p.slotMap + r]);
        }
        assertEquals(List.of(5, 6, 7, 9), List.of(p.data[0], p.data[1], p.data[2], p.data[3]));
        // logits of each window's last row
        assertEquals(2, p.logitRows);
        assertEquals(2, p.data[p.gather]);
        assertEquals(3, p.data[p.gather + 1]);
    }

    @Test
    void everySplitOfADecodeRowIsWalkedOnceInSlotOrder() {
        List<Window> ws = new ArrayList<>();
        int[] contexts = {0, 127, 128, 700, 5000, 20_000, 40_000};
        for (int c : contexts) {
            ws.add(w(new int[]{1}, table(c), false, true));
        }
        StepPlan p = new StepPlan(ws, 7, 8);
        assertEquals(contexts.length, p.decodeRows);
        int expectedParts = 0;
        for (int c : contexts) {
            expectedParts += KeySplits.count(c + 1);
        }
        assertEquals(expectedParts, p.partials);
        for (int row = 0; row < contexts.length; row++) {
            int first = p.data[p.cdesc + 3 * row], splits = p.data[p.cdesc + 3 * row + 1];
            assertEquals(KeySplits.count(contexts[row] + 1), splits);
            assertEquals(row, p.data[p.cdesc + 3 * row + 2]);
            boolean[] seen = new boolean[splits];
            for (int i = 0; i < p.decodeCtas; i++) {
                int[] d = desc(p, i);
                if (d[0] != row) {
                    continue;
                }
                assertEquals(1, d[1]);
                assertEquals(contexts[row], d[2]);
                assertEquals(row, d[7], "decode row index");
                for (int s = d[4]; s < d[5]; s++) {
                    assertTrue(!seen[s], "split " + s + " twice");
                    seen[s] = true;
                    assertEquals(first + s, d[6] + (s - d[4]), "slot of split " + s);
                }
            }
            for (int s = 0; s < splits; s++) {
                assertTrue(seen[s], "row " + row + " split " + s + " never walked");
            }
        }
    }

    /** Tiles of 64 MMA rows (9 rows of 7 heads: p0, prefill_warp_pairs, prefill_wgmma) and of 128 (18 rows: the warp-specialised prefills). */
    @ParameterizedTest
    @ValueSource(ints = {AttentionKernels.PREFILL_WGMMA, AttentionKernels.PREFILL_WS})
    void prefillTilesCoverEveryRowOnceAndWalkAllSplits(int kernel) {
        BlockTable t = table(300);
        t.reserve(350);
        StepPlan p = new StepPlan(List.of(w(new int[50], t, true, true)), 7, 8, 0, AttentionKernels.attentionTileRows(kernel));
        assertEquals(0, p.decodeCtas);
        int tile = AttentionKernels.attentionTileRows(kernel) / 7;
        assertEquals((50 + tile - 1) / tile, p.ctas, "tiles of " + tile + " rows");
        boolean[] covered = new boolean[50];
        int previous = Integer.MAX_VALUE;
        for (int i = 0; i < p.ctas; i++) {
            int[] d = desc(p, i);
            assertTrue(d[0] < previous, "the tiles with the most keys come first");
            previous = d[0];
            assertTrue(d[1] >= 1 && d[1] <= tile);
            assertEquals(300 + d[0], d[2]);
            assertEquals(0, d[4]);
            assertEquals(KeySplits.count(300 + 50), d[5]);
            assertEquals(-1, d[6]);
            for (int r = d[0]; r < d[0] + d[1]; r++) {
                assertTrue(!covered[r], "row " + r + " twice");
                covered[r] = true;
            }
        }
        for (int r = 0; r < 50; r++) {
            assertTrue(covered[r], "row " + r + " in no tile");
        }
        assertEquals(50, p.logitRows, "all logits asked for");
    }

    @Test
    void aStepsPrefillKeysAreItsLongestPrefillWindowsEndNotItsDecodeRows() {
        BlockTable decode = table(9000), chunk = table(4000), fresh = table(0);
        List<Window> ws = List.of(w(new int[]{1}, decode, false, true), w(new int[600], chunk, false, true),
                w(new int[300], fresh, false, true));
        // the decode row's 9,001 keys run in the decode kernels; the chunk's window ends at key 4,600
        assertEquals(4600, PrefillKernelChoice.keysOf(ws));
        assertEquals(0, PrefillKernelChoice.keysOf(List.of(w(new int[]{1}, table(20000), false, true))));
        assertTrue(PrefillKernelChoice.PAIRS_FROM_KEYS > 2048 && PrefillKernelChoice.PAIRS_FROM_KEYS <= 8192,
                "the pairs kernel was slower at 2K and faster at 8K (docs/bench/tile-pairs)");
    }

    @Test
    void aGraphPlanHasTheSameLayoutWhateverTheContexts() {
        StepPlan short1 = new StepPlan(List.of(w(new int[]{1}, table(10), false, true), w(new int[]{2}, table(200), false, true)), 7, 8, 4);
        StepPlan long1 = new StepPlan(List.of(w(new int[]{1}, table(400), false, true), w(new int[]{2}, table(500), false, true)), 7, 8, 4);
        assertEquals(short1.ctas, long1.ctas);
        assertEquals(short1.decodeCtas, long1.decodeCtas);
        assertEquals(short1.desc, long1.desc);
        assertEquals(short1.cdesc, long1.cdesc);
        assertEquals(short1.gather, long1.gather);
        assertEquals(short1.tables, long1.tables);
        assertEquals(8, short1.partials);
        // a row needing more splits than the graph's bucket is refused
        assertThrows(IllegalArgumentException.class,
                () -> new StepPlan(List.of(w(new int[]{1}, table(4 * SPLIT + 50), false, true)), 7, 8, 4));
    }

    /**
     * In a graph plan a row gets the CTAs its bucket needs (the same count whatever its context); its own splits are
     * spread over them by keys, each once, in slot order, so no CTA walks more than its share of the row's keys and one
     * split: a 32K-token row in the 64K bucket (256 slots, 128 CTAs of the 33B's 8 KV heads).
     */
    @Test
    void aGraphPlanSpreadsARowsSplitsOverAllItsCtasByKeys() {
        int bucket = KeySplits.count(64 * 1024);
        StepPlan p = new StepPlan(List.of(w(new int[]{1}, table(32 * 1024), false, true)), 7, 8, bucket);
        StepPlan shortRow = new StepPlan(List.of(w(new int[]{1}, table(40), false, true)), 7, 8, bucket);
        assertEquals(256, bucket);
        assertEquals(128, p.decodeCtas, "64K keys of 8 KV heads in runs of 512 keys");
        assertEquals(p.decodeCtas, shortRow.decodeCtas, "the bucket's CTA count");
        int splits = KeySplits.count(32 * 1024 + 1), keys = KeySplits.start(splits);
        assertEquals(193, splits);
        boolean[] seen = new boolean[splits];
        int next = 0, most = 0;
        for (int i = 0; i < p.decodeCtas; i++) {
            int[] d = desc(p, i);
            assertEquals(next, d[4], "CTA " + i + " starts where the previous one ended");
            next = d[5];
            most = Math.max(most, KeySplits.start(d[5]) - KeySplits.start(d[4]));
            for (int s = d[4]; s < d[5]; s++) {
                assertTrue(!seen[s], "split " + s + " twice");
                seen[s] = true;
                assertEquals(s, d[6] + (s - d[4]), "slot of split " + s);
            }
        }
        assertEquals(splits, next, "every split walked");
        int share = ((keys + p.decodeCtas - 1) / p.decodeCtas + SPLIT - 1) / SPLIT * SPLIT;
        assertEquals(384, share, "260 keys a CTA, rounded up to 128-key units");
        assertTrue(most <= share + KeySplits.size(keys - 1), most + " keys in one CTA, a share is " + share);
    }

    /** Below 16K keys (128-key splits) a CTA walks whole runs of splits, as many CTAs as eight an SM of 132 give. */
    @Test
    void shortRowsRunInWholeSplitsOverTheSmsCtas() {
        StepPlan p = new StepPlan(List.of(w(new int[]{1}, table(4096), false, true)), 7, 8);
        int splits = 4096 / SPLIT + 1;
        assertEquals(splits, p.partials);
        assertEquals(SPLIT, p.keysPerCta, "33 splits of 8 KV heads fill fewer than 1,056 CTAs: one split a CTA");
        assertEquals(splits, p.decodeCtas);
        StepPlan batch = new StepPlan(List.of(w(new int[]{1}, table(9000), false, true), w(new int[]{1}, table(9000), false, true)), 7, 8);
        assertEquals(2 * SPLIT, batch.keysPerCta, "2 x 71 splits of 8 KV heads: two splits a CTA");
        assertEquals(2 * 36, batch.decodeCtas);
    }

    /**
     * 32 decode rows of 1K context (8 KV heads: 256 CTAs of whole rows) would take 4 split CTAs each: each gets one CTA
     * that walks all of its splits and folds them (no partial slot, no merge); one such row alone keeps its split CTAs.
     */
    @Test
    void manyShortRowsFoldTheirSplitsInOneCtaEach() {
        List<Window> ws = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            ws.add(w(new int[]{1}, table(1000 + i % 20), false, true));
        }
        StepPlan p = new StepPlan(ws, 7, 8);
        assertEquals(32, p.decodeCtas);
        assertEquals(0, p.partials);
        for (int i = 0; i < 32; i++) {
            int[] d = desc(p, i);
            assertEquals(i, d[0]);
            assertEquals(0, d[4]);
            assertEquals(8, d[5], "all of the row's splits");
            assertEquals(-1, d[6], "no partial slot");
            assertEquals(0, p.data[p.cdesc + 3 * i + 1], "nothing for the merge");
            assertEquals(i, p.data[p.cdesc + 3 * i + 2]);
        }
        StepPlan alone = new StepPlan(List.of(w(new int[]{1}, table(1000), false, true)), 7, 8);
        assertEquals(8, alone.decodeCtas, "one split a CTA");
        assertEquals(8, alone.partials);
        StepPlan graph = new StepPlan(ws.subList(0, 32), 7, 8, KeySplits.count(1024));
        assertEquals(32, graph.decodeCtas, "a graph's bucket of 1K keys folds the same");
    }

    /**
     * At any context to 512K, alone or in a graph's bucket, 8 or 4 KV heads, no CTA of a decode row walks more than twice
     * the larger of an even share of the row's keys and its largest split (a packing that falls behind would leave the
     * last CTA the rest of the row: tens of thousands of keys, measured by a review's probe before this test).
     */
    @Test
    void noDecodeCtaWalksFarMoreThanItsShare() {
        BlockPool big = new BlockPool(40_000, 16);
        java.util.Random random = new java.util.Random(11);
        for (int trial = 0; trial < 300; trial++) {
            int position = trial < 19 ? (1 << trial) * 3 / 2 : random.nextInt(512 * 1024 - 20);
            int kvHeads = trial % 2 == 0 ? 8 : 4;
            BlockTable t = new BlockTable(big);
            t.reserve(position + 1);
            t.advance(position);
            Window w = w(new int[]{1}, t, false, true);
            int keys = position + 1, bucketKeys = Math.max(KeySplits.MIN, Integer.highestOneBit(keys - 1) << 1);
            for (int fixed : new int[]{0, KeySplits.count(bucketKeys)}) {
                StepPlan p = new StepPlan(List.of(w), 7, kvHeads, fixed);
                int splits = KeySplits.count(keys), rowKeys = KeySplits.start(splits), most = 0, next = 0;
                for (int i = 0; i < p.decodeCtas; i++) {
                    int[] d = desc(p, i);
                    assertEquals(next, d[4]);
                    next = d[5];
                    most = Math.max(most, KeySplits.start(d[5]) - KeySplits.start(d[4]));
                }
                assertEquals(splits, next, "every split walked");
                int even = (rowKeys + p.decodeCtas - 1) / p.decodeCtas, largest = KeySplits.size(rowKeys - 1);
                assertTrue(most <= 2 * Math.max(even + KeySplits.MIN, largest),
                        "position " + position + ", " + kvHeads + " KV heads, bucket " + fixed + ": a CTA walks " + most + " keys, an even share is "
                                + even + ", the largest split " + largest);
            }
            t.release();
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.backend.ModelStep;
import dev.spindle.backend.ModelStep.Window;
import dev.spindle.engine.kv.BlockPool;
import dev.spindle.engine.kv.BlockTable;
import org.junit.jupiter.api.Test;

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
    static final int SPLIT = CudaKernels.ATTENTION_SPLIT;
    final BlockPool pool = new BlockPool(4096, 16);

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
        int[] contexts = {0, 127, 128, 700, 5000};
        for (int c : contexts) {
            ws.add(w(new int[]{1}, table(c), false, true));
        }
        StepPlan p = new StepPlan(ws, 7, 8);
        assertEquals(contexts.length, p.decodeRows);
        int expectedParts = 0;
        for (int c : contexts) {
            expectedParts += c / SPLIT + 1;
        }
        assertEquals(expectedParts, p.partials);
        for (int row = 0; row < contexts.length; row++) {
            int first = p.data[p.cdesc + 3 * row], splits = p.data[p.cdesc + 3 * row + 1];
            assertEquals(contexts[row] / SPLIT + 1, splits);
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

    @Test
    void prefillTilesCoverEveryRowOnceAndWalkAllSplits() {
        BlockTable t = table(300);
        t.reserve(350);
        StepPlan p = new StepPlan(List.of(w(new int[50], t, true, true)), 7, 8);
        assertEquals(0, p.decodeCtas);
        int tile = CudaKernels.ATTENTION_TILE / 7;
        boolean[] covered = new boolean[50];
        int previous = Integer.MAX_VALUE;
        for (int i = 0; i < p.ctas; i++) {
            int[] d = desc(p, i);
            assertTrue(d[0] < previous, "the tiles with the most keys come first");
            previous = d[0];
            assertTrue(d[1] >= 1 && d[1] <= tile);
            assertEquals(300 + d[0], d[2]);
            assertEquals(0, d[4]);
            assertEquals((300 + 49) / SPLIT + 1, d[5]);
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
     * In a graph plan a row gets the CTAs its bucket needs; its own splits are spread over them in runs
     * as short as that count allows (257 splits over 128 CTAs: runs of 3, not the bucket's 4), each once.
     */
    @Test
    void aGraphPlanSpreadsARowsSplitsOverAllItsCtas() {
        StepPlan p = new StepPlan(List.of(w(new int[]{1}, table(32 * 1024), false, true)), 7, 8, 512);
        int splits = 32 * 1024 / SPLIT + 1;
        int busy = 0, most = 0;
        boolean[] seen = new boolean[splits];
        for (int i = 0; i < p.decodeCtas; i++) {
            int[] d = desc(p, i);
            int n = d[5] - d[4];
            if (n == 0) {
                continue;
            }
            busy++;
            most = Math.max(most, n);
            for (int s = d[4]; s < d[5]; s++) {
                assertTrue(!seen[s], "split " + s + " twice");
                seen[s] = true;
            }
        }
        for (int s = 0; s < splits; s++) {
            assertTrue(seen[s], "split " + s + " never walked");
        }
        assertEquals(512 / p.splitsPerCta, p.decodeCtas, "the bucket's CTA count");
        // the longest run is as short as the CTA count allows (the bucket's own run length would be longer)
        int shortest = (splits + p.decodeCtas - 1) / p.decodeCtas;
        assertEquals(shortest, most, "longest run");
        assertTrue(most < p.splitsPerCta, most + " splits a CTA, the bucket's run is " + p.splitsPerCta);
        assertEquals((splits + most - 1) / most, busy, "busy CTAs");
    }
}

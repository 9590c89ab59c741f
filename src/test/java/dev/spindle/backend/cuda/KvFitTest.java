package dev.spindle.backend.cuda;

import dev.spindle.Trials;
import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.KvCapacityException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A bench figure too large for the KV pool is reported as skipped (its entry says why) instead of ending the run. */
class KvFitTest {
    /** A bench figure: its sequences and their context tokens, against a pool of 16-token blocks. */
    record Figure(int batch, int context, int blocks) {
    }

    @Test
    void aFigureIsSkippedExactlyWhenItsSequencesAndTheirNextTokenCannotBeReserved() {
        Trials.forAll(1000, r -> new Figure(Trials.between(r, 1, 40), Trials.between(r, 0, 300), Trials.between(r, 1, 400)),
                f -> aFigureIsSkippedExactlyWhenItsSequencesAndTheirNextTokenCannotBeReserved(f.batch(), f.context(), f.blocks()));
    }

    static void aFigureIsSkippedExactlyWhenItsSequencesAndTheirNextTokenCannotBeReserved(int batch, int context, int blocks) {
        BlockPool pool = new BlockPool(blocks, 16);
        Map<String, Object> skipped = KvFit.skipped(batch, context, pool);
        // what the decode figure does first: reserve each sequence's context and its first decode token
        List<BlockTable> tables = new ArrayList<>();
        boolean fits = true;
        try {
            for (int i = 0; i < batch; i++) {
                BlockTable t = new BlockTable(pool);
                tables.add(t);
                t.reserve(context + 1);
            }
        } catch (KvCapacityException e) {
            fits = false;
        } finally {
            tables.forEach(BlockTable::release);
        }
        assertEquals(fits, skipped == null, batch + " x " + context + " on " + blocks + " blocks: " + skipped);
        assertEquals(blocks, pool.freeBlocks(), "the check takes no block");
    }

    @Test
    void theEntrySaysWhatTheFigureNeedsAndWhatThePoolHas() {
        BlockPool pool = new BlockPool(2881, 16);
        Map<String, Object> e = KvFit.skipped(64, 1024, pool);
        assertEquals(64, e.get("batch"));
        assertEquals(1024, e.get("context_tokens"));
        String why = (String) e.get("skipped");
        // 64 sequences of 1,025 positions: 65 blocks each
        assertTrue(why.contains("64 sequences of 1024 tokens need 4160 blocks of 16 tokens, the pool has 2881 free of 2881"), why);
        assertTrue(why.contains("--kv-memory-fraction"), why);
        assertNull(KvFit.skipped(32, 1024, pool));
        String one = (String) KvFit.skipped(1, 131072, pool).get("skipped");
        assertTrue(one.contains("1 sequence of 131072 tokens needs 8193 blocks"), one);
        assertEquals(2080, KvFit.blocksFor(32, 1024, 16));
        assertEquals(1, KvFit.blocksFor(1, 15, 16));
        assertEquals(2, KvFit.blocksFor(1, 16, 16));
    }

    @Test
    void aPromptIsSkippedWhenItsPositionsDoNotFit() {
        BlockPool pool = new BlockPool(2048, 16);
        assertNull(KvFit.skippedPrompt(32768, pool));
        Map<String, Object> e = KvFit.skippedPrompt(32769, pool);
        assertEquals(32769, e.get("tokens"));
        assertTrue(((String) e.get("skipped")).contains("a prompt of 32769 tokens needs 2049 blocks"), e.toString());
    }

    @Test
    void aFigureThatOutgrowsThePoolSaysHowFarItGot() {
        BlockPool pool = new BlockPool(4, 16);
        List<BlockTable> tables = List.of(new BlockTable(pool), new BlockTable(pool));
        tables.get(0).reserve(32);
        tables.get(0).advance(32);
        tables.get(1).reserve(32);
        tables.get(1).advance(31);
        KvCapacityException full = assertThrows(KvCapacityException.class, () -> tables.get(0).reserve(33));
        Map<String, Object> e = KvFit.ranOut(2, 16, tables, pool, full);
        String why = (String) e.get("skipped");
        assertTrue(why.startsWith("ran out of KV blocks at 32 tokens a sequence (KV pool exhausted"), why);
        assertTrue(why.endsWith("4 blocks of 16 tokens): not measured"), why);
        tables.forEach(BlockTable::release);
    }
}

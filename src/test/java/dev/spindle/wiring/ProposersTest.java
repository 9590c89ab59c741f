package dev.spindle.wiring;

import dev.spindle.backend.ContextHead;
import dev.spindle.backend.DraftContexts;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.step.Proposal;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Proposers' refusals, and what a head opened for the engine owns. */
class ProposersTest {
    /** A head closes what it owns (the arena of its host weights) with itself, after its own storage. */
    @Test
    void aHeadClosesWhatItOwns() {
        DraftHeadConfig hc = DraftHeadConfig.read(java.nio.file.Path.of("models/spindle-chat-dflash"));
        boolean[] closed = {false};
        try (ContextHead<DraftContexts.Span> head = new ContextHead<>(hc, new int[]{1}, x -> { }) {
            @Override
            public void inject(long id, int from, float[][] taps, int count) {
                contexts.extendAt(id, from, () -> new DraftContexts.Span() { }).rows += count;
            }

            @Override
            public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
                return new Proposal(new int[0], null);
            }

            @Override
            public float[][] lastLogits() {
                return new float[0][];
            }

            @Override
            public String describe() {
                return "test head";
            }

            @Override
            public void close() {
                closeResources();
            }
        }) {
            assertSame(head, head.owning(() -> closed[0] = true));
            head.inject(7, 3, null, 5);
            assertEquals(3, head.contextStart(7));
            assertEquals(8, head.contextEnd(7));
            head.truncate(7, 6);
            assertEquals(6, head.contextEnd(7));
            head.release(7);
            assertEquals(0, head.contextEnd(7));
            assertTrue(!closed[0]);
        }
        assertTrue(closed[0], "the owned resource is closed with the head");
    }

    /** A head directory that is not there is reported as missing, and a draft model's as the wrong kind of model. */
    @Test
    void aMissingOrWrongHeadDirectoryIsNamed(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
        java.nio.file.Path none = tmp.resolve("no-such-head");
        RuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Proposers.draftHead(
                new SpeculativeConfig(SpeculativeConfig.Method.DFLASH, none, 4, 1, 4, 16), null, null, null));
        assertTrue(e.getMessage().contains("not found") && e.getMessage().contains("no-such-head"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Proposers.draftHead(
                new SpeculativeConfig(SpeculativeConfig.Method.DFLASH, java.nio.file.Path.of("models/spindle-chat-drafter"),
                        4, 1, 4, 16), null, null, null));
        assertTrue(e.getMessage().contains("needs a DFlash head"), e.getMessage());
    }
}

package dev.spindle.engine.sched;

import dev.spindle.backend.cpu.CpuDraftHead;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.engine.speculative.DFlashProposer;
import dev.spindle.engine.speculative.Proposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.eval.Divergence;
import dev.spindle.model.AffineQuantizer;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadListener;
import dev.spindle.step.DraftHead;
import dev.spindle.step.Proposal;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The trained DFlash2 head packed at load to affine-4 (--dflash-head-quantization affine4): drafted greedy still equals plain
 * greedy; the drafts' distribution, measured against the bf16 head's on the same contexts and anchors (every draft call of
 * the run), stays close; and the acceptance it keeps is printed beside the bf16 head's.
 */
class AffineDraftHeadTest {
    static final Path HEAD = Path.of("models/spindle-chat-dflash2");

    @BeforeAll
    static void load() {
        SpeculativeEngineTest.loadTarget();
    }

    @AfterAll
    static void close() {
        SpeculativeEngineTest.target.close();
    }

    private static CpuDraftHead head(Arena arena, boolean affine) {
        DraftHeadConfig hc = DraftHeadConfig.read(HEAD);
        var t = SpeculativeEngineTest.target;
        return new CpuDraftHead(hc, DraftHeadLoader.load(HEAD, hc, arena, LoadListener.NONE), t.weights().embedding().data(), t.weights().lmHead(),
                t.config().vocabSize(), hc.tapLayers(1), 2, null,
                m -> affine ? AffineQuantizer.quantize(m, 4, m.cols() % 64 == 0 ? 64 : 32, arena) : m);
    }

    @Test
    void anAffine4HeadDraftsCloseToTheReleaseAndKeepsGreedyExact() {
        List<int[]> ps = SpeculativeEngineTest.prompts.subList(0, 7);
        try (CpuForwardPass pass = SpeculativeEngineTest.targetPass(); Arena arena = Arena.ofShared()) {
            var plain = SpeculativeEngineTest.run(pass, Speculation.NONE, ps, SpeculativeEngineTest::greedy);
            double bf16Acceptance;
            Speculation bf16 = new Speculation(new DFlashProposer(head(arena, false), false), 7, 64);
            try (Proposer p = bf16.proposer()) {
                var r = SpeculativeEngineTest.run(pass, bf16, ps, SpeculativeEngineTest::greedy);
                assertEquals(plain.signatures(), r.signatures());
                bf16Acceptance = r.spec().acceptanceRate();
            }
            CpuDraftHead packed = head(arena, true);
            assertTrue(packed.linearFormat().startsWith("mlx affine 4-bit"), packed.linearFormat());
            Comparing both = new Comparing(packed, head(arena, false));
            Speculation affine = new Speculation(new DFlashProposer(both, false), 7, 64);
            try (Proposer p = affine.proposer()) {
                var r = SpeculativeEngineTest.run(pass, affine, ps, SpeculativeEngineTest::greedy);
                assertEquals(plain.signatures(), r.signatures(), "drafted greedy with an affine-4 head equals plain greedy");
                double kl = both.kl / both.rows;
                System.out.printf("[affine4 head] DFlash2, 7 prompts: %d draft rows, KL(bf16 head || affine-4 head) %.4g, top-1 agreement %.4f;"
                                + " acceptance %.3f (bf16 head %.3f), %.2f tokens a window%n", both.rows, kl, both.agree / (double) both.rows,
                        r.spec().acceptanceRate(), bf16Acceptance, r.spec().meanAcceptedLength());
                assertTrue(both.rows > 100, "draft rows compared: " + both.rows);
                assertTrue(kl > 0 && kl < 0.5, "KL of the drafts' distributions " + kl);
                assertTrue(r.spec().acceptanceRate() > bf16Acceptance - 0.15, "acceptance " + r.spec().acceptanceRate() + " against " + bf16Acceptance);
            }
        }
    }

    @Test
    void theOptionIsReadByName() {
        assertEquals(dev.spindle.engine.speculative.SpeculativeConfig.HeadWeights.AFFINE4,
                dev.spindle.engine.speculative.SpeculativeConfig.HeadWeights.parse("affine4"));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> dev.spindle.engine.speculative.SpeculativeConfig.HeadWeights.parse("int4"));
        assertTrue(e.getMessage().contains("expected none or affine4"), e.getMessage());
    }

    /** Drafts with {@code lossy}, and feeds {@code reference} the same context and calls, comparing their draft logits row by row. */
    static final class Comparing implements DraftHead {
        final DraftHead lossy, reference;
        double kl;
        long rows, agree;

        Comparing(DraftHead lossy, DraftHead reference) {
            this.lossy = lossy;
            this.reference = reference;
        }

        @Override
        public int blockSize() {
            return lossy.blockSize();
        }

        @Override
        public int[] tapLayers() {
            return lossy.tapLayers();
        }

        @Override
        public void inject(long id, int from, float[][] taps, int count) {
            lossy.inject(id, from, taps, count);
            reference.inject(id, from, taps, count);
        }

        @Override
        public int contextEnd(long id) {
            return lossy.contextEnd(id);
        }

        @Override
        public int contextStart(long id) {
            return lossy.contextStart(id);
        }

        @Override
        public void truncate(long id, int position) {
            lossy.truncate(id, position);
            reference.truncate(id, position);
        }

        @Override
        public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
            Proposal p = lossy.draft(id, anchor, drafts, sampling);
            float[][] a = lossy.lastLogits();
            reference.draft(id, anchor, drafts, sampling);
            float[][] b = reference.lastLogits();
            for (int r = 0; r < Math.min(a.length, b.length); r++) {
                kl += Divergence.kl(b[r], a[r]);
                agree += Divergence.argmax(a[r]) == Divergence.argmax(b[r]) ? 1 : 0;
                rows++;
            }
            return p;
        }

        @Override
        public float[][] lastLogits() {
            return lossy.lastLogits();
        }

        @Override
        public void release(long id) {
            lossy.release(id);
            reference.release(id);
        }

        @Override
        public String describe() {
            return lossy.describe();
        }

        @Override
        public void close() {
            lossy.close();
            reference.close();
        }
    }
}

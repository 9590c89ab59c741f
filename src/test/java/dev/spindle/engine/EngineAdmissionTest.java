package dev.spindle.engine;

import dev.spindle.Fixture;
import dev.spindle.backend.ForwardingPass;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The waiting bound counts only the requests that must wait: a burst into an idle engine first fills
 * every free batch slot, then the waiting places, and only the rest is refused.
 */
class EngineAdmissionTest {
    @Test
    void aBurstFillsTheFreeSlotsBeforeTheWaitingBoundCounts() throws Exception {
        try (Fixture f = new Fixture("llama-gqa")) {
            EngineFaultTest.Faulty pass = new EngineFaultTest.Faulty(
                    new CpuForwardPass(f.model.config(), f.model.weights(), 512, 16, 2, KvSlots.PER_EXECUTED_LAYER));
            CountDownLatch hold = new CountDownLatch(1);
            pass.hold = hold; // no step finishes while the burst arrives
            int slots = 6, waiting = 2;
            Engine engine = new Engine(pass, 512, slots, Set.of(), waiting);
            try {
                assertEquals(slots + waiting, engine.maxQueued());
                List<CompletableFuture<String>> accepted = new ArrayList<>();
                int refused = 0;
                for (int i = 0; i < 20; i++) {
                    try {
                        accepted.add(EngineFaultTest.request(engine, new int[]{1, 2, 3 + i}, 2));
                    } catch (EngineBusyException e) {
                        refused++;
                        assertTrue(e.waiting() <= waiting, "the refusal reports the requests that must wait: " + e.waiting());
                    }
                }
                assertEquals(slots + waiting, accepted.size(), "an idle engine takes a request per free slot and then its waiting places");
                assertEquals(20 - slots - waiting, refused);
                hold.countDown();
                for (CompletableFuture<String> r : accepted) {
                    assertEquals("length", r.get(60, TimeUnit.SECONDS));
                }
                assertEquals(0, engine.waiting());
            } finally {
                hold.countDown();
                engine.close();
            }
        }
    }

    /** The CPU pass, running a step only for each permit handed out. */
    static final class Metered extends ForwardingPass {
        final Semaphore permits = new Semaphore(0);

        Metered(CpuForwardPass inner) {
            super(inner);
        }

        @Override
        public StepOutput execute(ModelStep step) {
            permits.acquireUninterruptibly();
            return inner.execute(step);
        }
    }

    @Test
    void aFullBatchLeavesOnlyTheWaitingPlaces() throws Exception {
        try (Fixture f = new Fixture("llama-gqa")) {
            Metered pass = new Metered(new CpuForwardPass(f.model.config(), f.model.weights(), 512, 16, 2, KvSlots.PER_EXECUTED_LAYER));
            int slots = 2, waiting = 3;
            Engine engine = new Engine(pass, 512, slots, Set.of(), waiting);
            try {
                List<CompletableFuture<String>> all = new ArrayList<>();
                for (int i = 0; i < slots; i++) {
                    all.add(EngineFaultTest.request(engine, new int[]{4, 5, 6 + i}, 64));
                }
                // a step at a time until both run (the engine may have started a step with the first alone)
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (engine.stats().running() < slots && System.nanoTime() < deadline) {
                    if (pass.permits.availablePermits() == 0) {
                        pass.permits.release();
                    }
                    Thread.sleep(20);
                }
                assertEquals(slots, engine.stats().running(), "the first requests run");
                for (int i = 0; i < waiting; i++) {
                    all.add(EngineFaultTest.request(engine, new int[]{7, 8, 9 + i}, 2));
                }
                assertThrows(EngineBusyException.class, () -> EngineFaultTest.request(engine, new int[]{1, 1, 1}, 2),
                        "with every slot taken only the waiting places are left");
                pass.permits.release(10_000);
                for (CompletableFuture<String> r : all) {
                    assertEquals("length", r.get(60, TimeUnit.SECONDS));
                }
            } finally {
                pass.permits.release(10_000);
                engine.close();
            }
        }
    }
}

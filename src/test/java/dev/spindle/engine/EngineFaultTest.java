package dev.spindle.engine;

import dev.spindle.Fixture;
import dev.spindle.backend.ForwardingPass;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A backend that throws: the requests in the failing step get an error event naming the failure,
 * the engine keeps serving, a backend that keeps failing makes the engine unhealthy (readiness goes
 * down) without a hot loop, and close() returns only once the engine thread has stopped.
 */
class EngineFaultTest {
    /** The CPU pass, failing the steps for which {@code fail} says so. */
    static final class Faulty extends ForwardingPass {
        final AtomicInteger calls = new AtomicInteger();
        volatile java.util.function.IntPredicate fail = n -> false;
        volatile java.util.function.Predicate<ModelStep> failStep = s -> false;
        volatile java.util.concurrent.CountDownLatch hold; // steps wait for it (a test submits all its requests first)
        volatile boolean closed;

        Faulty(CpuForwardPass inner) {
            super(inner);
        }

        @Override
        public StepOutput execute(ModelStep step) {
            if (closed) {
                throw new AssertionError("a step ran after the backend was closed");
            }
            java.util.concurrent.CountDownLatch h = hold;
            if (h != null) {
                try {
                    h.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            if (fail.test(calls.incrementAndGet()) || failStep.test(step)) {
                throw new IllegalStateException("device lost (injected)");
            }
            return inner.execute(step);
        }

        @Override
        public void close() {
            closed = true;
            inner.close();
        }
    }

    static CompletableFuture<String> request(Engine engine, int[] prompt, int max) {
        CompletableFuture<String> done = new CompletableFuture<>();
        engine.submit(prompt, SamplingParams.greedy(max).withIgnoreEos(true), new TokenSink() {
            @Override
            public void onToken(TokenEvent e) {
                if (e.finishReason() != null) {
                    done.complete(e.finishReason());
                }
            }

            @Override
            public void onError(Throwable error) {
                done.complete("error: " + error.getMessage());
            }
        });
        return done;
    }

    @Test
    void aFailingStepFailsItsRequestsAndTheEngineGoesOn() throws Exception {
        try (Fixture f = new Fixture("llama-gqa")) {
            Faulty pass = new Faulty(new CpuForwardPass(f.model.config(), f.model.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER));
            // the first step that runs both requests fails; steps wait until both are submitted, so the first cannot
            // finish alone on a loaded machine (no race with the engine thread)
            java.util.concurrent.atomic.AtomicBoolean once = new java.util.concurrent.atomic.AtomicBoolean();
            pass.failStep = step -> step.windows().size() == 2 && once.compareAndSet(false, true);
            java.util.concurrent.CountDownLatch bothIn = new java.util.concurrent.CountDownLatch(1);
            pass.hold = bothIn;
            Engine engine = new Engine(pass, 512, 8, Set.of());
            try {
                List<CompletableFuture<String>> first = List.of(request(engine, f.prompts.get(0), 8), request(engine, f.prompts.get(1), 8));
                bothIn.countDown();
                for (CompletableFuture<String> r : first) {
                    String out = r.get(60, TimeUnit.SECONDS);
                    assertTrue(out.startsWith("error: the forward pass failed: device lost (injected)"), out);
                }
                assertEquals("length", request(engine, f.prompts.get(2), 8).get(60, TimeUnit.SECONDS), "the next request is served");
                assertTrue(engine.healthy());
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (engine.stats().running() > 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5); // the stats snapshot follows the step that delivered the last event
                }
                assertEquals(0, engine.stats().running());
                assertEquals(64, engine.stats().kvBlocksFree(), "the failed requests' blocks came back");
            } finally {
                engine.close();
                pass.close();
            }
        }
    }

    @Test
    void aBackendThatKeepsFailingMakesTheEngineUnhealthyWithoutAHotLoop() throws Exception {
        try (Fixture f = new Fixture("llama-gqa")) {
            Faulty pass = new Faulty(new CpuForwardPass(f.model.config(), f.model.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER));
            pass.fail = n -> true;
            Engine engine = new Engine(pass, 512, 8, Set.of());
            for (int i = 0; i < Engine.UNHEALTHY_AFTER; i++) {
                String out = request(engine, f.prompts.get(0), 4).get(60, TimeUnit.SECONDS);
                assertTrue(out.startsWith("error: "), out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (engine.healthy() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertFalse(engine.healthy(), "readiness goes down");
            assertTrue(engine.lastFailure().contains("failed"), engine.lastFailure());
            int calls = pass.calls.get();
            Thread.sleep(300);
            assertEquals(calls, pass.calls.get(), "an idle engine does not retry on its own");
            engine.close();
            pass.close(); // an assertion in execute would fail had a step run after close() returned
            pass.fail = n -> false;
        }
    }
}

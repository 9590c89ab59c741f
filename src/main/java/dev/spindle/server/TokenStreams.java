package dev.spindle.server;

import dev.spindle.engine.Engine;
import dev.spindle.engine.SamplingParams;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.smallrye.mutiny.subscription.BackPressureStrategy;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Bridges the engine to Mutiny: a request's tokens as a {@code Multi}. Events leave the
 * engine thread at once (buffered, then handed to a worker); cancelling the
 * subscription (client gone, stop string found) cancels the request in the engine,
 * which frees its blocks before its next step.
 */
@ApplicationScoped
public class TokenStreams {
    private final ModelService service;
    private final RequestMetrics metrics;

    public TokenStreams(ModelService service, RequestMetrics metrics) {
        this.service = service;
        this.metrics = metrics;
    }

    public Multi<TokenEvent> generate(int[] prompt, SamplingParams params) {
        Engine engine = service.engine();
        return Multi.createFrom().<TokenEvent>emitter(em -> {
            AtomicBoolean finished = new AtomicBoolean();
            long submitted = System.nanoTime();
            long[] last = {0};
            long id = engine.submit(prompt, params, new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    long now = System.nanoTime();
                    if (last[0] == 0) {
                        metrics.firstToken(now - submitted);
                    } else {
                        metrics.interToken(now - last[0]);
                    }
                    last[0] = now;
                    em.emit(e);
                    if (e.finishReason() != null) {
                        finished.set(true);
                        metrics.endToEnd(now - submitted);
                        metrics.outcome("finished");
                        em.complete();
                    }
                }

                @Override
                public void onError(Throwable error) {
                    finished.set(true);
                    metrics.outcome("error");
                    em.fail(error);
                }
            });
            em.onTermination(() -> {
                if (!finished.get()) {
                    metrics.outcome("cancelled");
                    engine.cancel(id);
                }
            });
        }, BackPressureStrategy.BUFFER).emitOn(Infrastructure.getDefaultWorkerPool());
    }
}

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

    public TokenStreams(ModelService service) {
        this.service = service;
    }

    public Multi<TokenEvent> generate(int[] prompt, SamplingParams params) {
        Engine engine = service.engine();
        return Multi.createFrom().<TokenEvent>emitter(em -> {
            AtomicBoolean finished = new AtomicBoolean();
            long id = engine.submit(prompt, params, new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    em.emit(e);
                    if (e.finishReason() != null) {
                        finished.set(true);
                        em.complete();
                    }
                }

                @Override
                public void onError(Throwable error) {
                    finished.set(true);
                    em.fail(error);
                }
            });
            em.onTermination(() -> {
                if (!finished.get()) {
                    engine.cancel(id);
                }
            });
        }, BackPressureStrategy.BUFFER).emitOn(Infrastructure.getDefaultWorkerPool());
    }
}

package dev.spindle.server;

import dev.spindle.engine.Engine;
import dev.spindle.engine.EngineBusyException;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.sample.SamplingParams;
import dev.spindle.server.pipeline.ApiException;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.smallrye.mutiny.operators.multi.processors.UnicastProcessor;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Bridges the engine to Mutiny: each choice's tokens as a {@code Multi}. Requests are
 * submitted when {@link #generate} is called, so a full waiting queue refuses them
 * ({@link EngineBusyException}) before any response is begun. Events leave the engine
 * thread at once (buffered, then handed to a worker); cancelling a subscription (client
 * gone, stop string found) cancels the request in the engine, which frees its blocks
 * before its next step.
 */
@ApplicationScoped
public class TokenStreams {
    private final ModelService service;
    private final RequestMetrics metrics;

    public TokenStreams(ModelService service, RequestMetrics metrics) {
        this.service = service;
        this.metrics = metrics;
    }

    /**
     * Submits one engine request per choice, all or none: when the waiting bound refuses one,
     * those already submitted are cancelled and the exception is thrown.
     */
    public List<Multi<TokenEvent>> generate(int[] prompt, List<SamplingParams> choices) {
        Engine engine = service.engine();
        if (choices.size() > engine.maxQueued()) {
            throw new ApiException(400, "n = " + choices.size() + " choices are " + choices.size()
                    + " requests, more than this server's batch slots and max-waiting-requests hold (" + engine.maxQueued() + ")", "n");
        }
        List<Multi<TokenEvent>> out = new ArrayList<>();
        List<Long> submitted = new ArrayList<>();
        try {
            for (SamplingParams params : choices) {
                out.add(submit(engine, prompt, params, submitted));
            }
        } catch (EngineBusyException busy) {
            submitted.forEach(engine::cancel);
            metrics.outcome("rejected");
            throw busy;
        }
        return out;
    }

    private Multi<TokenEvent> submit(Engine engine, int[] prompt, SamplingParams params, List<Long> submitted) {
        UnicastProcessor<TokenEvent> events = UnicastProcessor.create();
        AtomicBoolean finished = new AtomicBoolean();
        long t0 = System.nanoTime();
        long[] last = {0};
        long id = engine.submit(prompt, params, new TokenSink() {
            @Override
            public void onToken(TokenEvent e) {
                long now = System.nanoTime();
                if (last[0] == 0) {
                    metrics.firstToken(now - t0);
                } else {
                    metrics.interToken(now - last[0]);
                }
                last[0] = now;
                events.onNext(e);
                if (e.finishReason() != null) {
                    finished.set(true);
                    metrics.endToEnd(now - t0);
                    metrics.outcome("finished");
                    events.onComplete();
                }
            }

            @Override
            public void onError(Throwable error) {
                finished.set(true);
                metrics.outcome("error");
                events.onError(error);
            }
        });
        submitted.add(id);
        return events.onTermination().invoke((failure, cancelled) -> {
            if (cancelled && !finished.get()) {
                metrics.outcome("cancelled");
                engine.cancel(id);
            }
        }).emitOn(Infrastructure.getDefaultWorkerPool());
    }
}

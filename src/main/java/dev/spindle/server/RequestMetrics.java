package dev.spindle.server;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import jakarta.enterprise.context.ApplicationScoped;

import java.time.Duration;

/** Per-request latency histograms and outcome counts, recorded by {@link TokenStreams}. */
@ApplicationScoped
public class RequestMetrics {
    private final MeterRegistry registry;
    private final Timer timeToFirstToken;
    private final Timer interTokenLatency;
    private final Timer endToEnd;

    public RequestMetrics(MeterRegistry registry) {
        this.registry = registry;
        this.timeToFirstToken = histogram("spindle.time.to.first.token", "From submission to the first generated token");
        this.interTokenLatency = histogram("spindle.inter.token.latency", "Between consecutive tokens of a request");
        this.endToEnd = histogram("spindle.request.latency", "From submission to the last token");
    }

    private Timer histogram(String name, String help) {
        return Timer.builder(name).description(help).publishPercentileHistogram()
                .minimumExpectedValue(Duration.ofMillis(1)).maximumExpectedValue(Duration.ofMinutes(10)).register(registry);
    }

    // accessed through methods: the bean is a client proxy, whose fields are not the instance's
    void firstToken(long nanos) {
        timeToFirstToken.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    void interToken(long nanos) {
        interTokenLatency.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    void endToEnd(long nanos) {
        endToEnd.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    /** outcome: finished (stop or length), cancelled (client gone or stop string), error. */
    void outcome(String outcome) {
        Counter.builder("spindle.requests").tag("outcome", outcome).description("Requests by outcome").register(registry).increment();
    }
}

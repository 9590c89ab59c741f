package dev.spindle.server.metrics;

import dev.spindle.engine.EngineStats;
import dev.spindle.server.ModelService;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.Startup;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.function.ToDoubleFunction;

/** Prometheus metrics (at /q/metrics) read from the engine's per-step stats snapshot. */
@ApplicationScoped
@Startup
public class EngineMetrics {
    public EngineMetrics(MeterRegistry registry, ModelService service) {
        gauge(registry, service, "spindle.requests.running", "Sequences in the running batch", EngineStats::running);
        gauge(registry, service, "spindle.requests.waiting", "Sequences waiting for admission", EngineStats::waiting);
        gauge(registry, service, "spindle.kv.usage", "Fraction of KV blocks in use", EngineStats::kvUsage);
        gauge(registry, service, "spindle.kv.blocks.cached", "KV blocks holding cached prefixes", EngineStats::kvBlocksCached);
        gauge(registry, service, "spindle.prefix.cache.hit.rate", "Prompt tokens served from the prefix cache / looked up", EngineStats::prefixHitRate);
        counter(registry, service, "spindle.prompt.tokens", "Prompt tokens received", EngineStats::promptTokens);
        counter(registry, service, "spindle.generation.tokens", "Tokens generated", EngineStats::generatedTokens);
        counter(registry, service, "spindle.preemptions", "Sequences preempted for lack of KV blocks", EngineStats::preemptions);
        counter(registry, service, "spindle.engine.steps", "Engine steps run", EngineStats::steps);
        counter(registry, service, "spindle.requests.finished", "Requests finished or cancelled", EngineStats::finishedRequests);
        // the names the Gateway API Inference Extension's reference endpoint picker reads (vLLM's)
        gauge(registry, service, "vllm:num_requests_waiting", "Requests waiting for admission (queue length)", EngineStats::waiting);
        gauge(registry, service, "vllm:num_requests_running", "Requests in the running batch", EngineStats::running);
        gauge(registry, service, "vllm:kv_cache_usage_perc", "KV-cache utilisation, 0 to 1", EngineStats::kvUsage);
        gauge(registry, service, "vllm:gpu_cache_usage_perc", "KV-cache utilisation, 0 to 1 (older name)", EngineStats::kvUsage);
    }

    private static void gauge(MeterRegistry r, ModelService s, String name, String help, ToDoubleFunction<EngineStats> f) {
        Gauge.builder(name, s, svc -> f.applyAsDouble(svc.stats())).description(help).register(r);
    }

    private static void counter(MeterRegistry r, ModelService s, String name, String help, ToDoubleFunction<EngineStats> f) {
        FunctionCounter.builder(name, s, svc -> f.applyAsDouble(svc.stats())).description(help).register(r);
    }
}

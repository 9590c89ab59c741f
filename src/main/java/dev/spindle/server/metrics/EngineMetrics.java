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
        speculative(registry, service);
    }

    /** Speculative decoding: Spindle's names and vLLM's {@code vllm:spec_decode_*} beside them (registered when a method is configured). */
    private static void speculative(MeterRegistry r, ModelService s) {
        var cfg = s.config().speculative();
        if (cfg.method().trim().equalsIgnoreCase("none")) {
            return;
        }
        counter(r, s, "spindle.spec.drafts", "Windows that verified drafts", e -> e.speculative().drafts());
        counter(r, s, "spindle.spec.draft.tokens", "Draft tokens verified", e -> e.speculative().draftTokens());
        counter(r, s, "spindle.spec.accepted.tokens", "Draft tokens accepted", e -> e.speculative().acceptedTokens());
        gauge(r, s, "spindle.spec.acceptance.rate", "Accepted / drafted tokens since start", e -> e.speculative().acceptanceRate());
        gauge(r, s, "spindle.spec.mean.accepted.length", "Tokens a drafted window produced on average (accepted drafts + 1)",
                e -> e.speculative().meanAcceptedLength());
        counter(r, s, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts", e -> e.speculative().drafts());
        counter(r, s, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens", e -> e.speculative().draftTokens());
        counter(r, s, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens", e -> e.speculative().acceptedTokens());
        for (int i = 0; i < cfg.numTokens(); i++) {
            int pos = i;
            ToDoubleFunction<EngineStats> at = e -> pos < e.speculative().acceptedAtPosition().length ? e.speculative().acceptedAtPosition()[pos] : 0;
            FunctionCounter.builder("spindle.spec.accepted.tokens.per.position", s, svc -> at.applyAsDouble(svc.stats())).tag("position", "" + pos)
                    .description("Drafts accepted at each position of a window").register(r);
            FunctionCounter.builder("vllm:spec_decode_num_accepted_tokens_per_pos", s, svc -> at.applyAsDouble(svc.stats())).tag("position", "" + pos)
                    .description("Accepted tokens per draft position").register(r);
        }
        for (int len = 0; len <= cfg.numTokens(); len++) {
            int n = len;
            FunctionCounter.builder("spindle.spec.accepted.length", s,
                            svc -> n < svc.stats().speculative().acceptedLength().length ? svc.stats().speculative().acceptedLength()[n] : 0)
                    .tag("accepted", "" + n).description("Drafted windows by how many drafts they accepted (a histogram over 0..k)").register(r);
        }
    }

    private static void gauge(MeterRegistry r, ModelService s, String name, String help, ToDoubleFunction<EngineStats> f) {
        Gauge.builder(name, s, svc -> f.applyAsDouble(svc.stats())).description(help).register(r);
    }

    private static void counter(MeterRegistry r, ModelService s, String name, String help, ToDoubleFunction<EngineStats> f) {
        FunctionCounter.builder(name, s, svc -> f.applyAsDouble(svc.stats())).description(help).register(r);
    }
}

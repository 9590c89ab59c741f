package dev.spindle.server;

import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;

/** Ready once the model is loaded and the engine runs (at /q/health/ready). */
@Readiness
@ApplicationScoped
public class ModelReadiness implements HealthCheck {
    private final ModelService service;

    public ModelReadiness(ModelService service) {
        this.service = service;
    }

    @Override
    public HealthCheckResponse call() {
        if (!service.ready()) {
            return HealthCheckResponse.named("model").down().withData("model", service.servedName()).withData("state", "loading").build();
        }
        var stats = service.stats();
        if (!service.engine().healthy()) {
            return HealthCheckResponse.named("model").down().withData("model", service.servedName()).withData("state", "failing")
                    .withData("error", String.valueOf(service.engine().lastFailure())).build();
        }
        return HealthCheckResponse.named("model").up().withData("model", service.servedName())
                .withData("running", stats.running()).withData("waiting", stats.waiting()).build();
    }
}

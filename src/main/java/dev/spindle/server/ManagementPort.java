package dev.spindle.server;

import io.micrometer.prometheus.PrometheusMeterRegistry;
import io.quarkus.logging.Log;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.quarkus.vertx.http.runtime.filters.Filters;
import io.smallrye.health.SmallRyeHealth;
import io.smallrye.health.SmallRyeHealthReporter;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import org.eclipse.microprofile.config.inject.ConfigProperty;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.function.Supplier;

/**
 * With {@code spindle.management-port} set, {@code /q/metrics} and {@code /q/health} (and its
 * live, ready and started checks) are served on that port alone and the API port answers 404
 * for {@code /q/}, so that the API port can be exposed by itself. Quarkus' own management
 * interface cannot do this: it is switched on when the application is built, not when it
 * starts, and Spindle ships one build for every deployment. Unset (the default), the
 * endpoints stay on the API port.
 */
@ApplicationScoped
public class ManagementPort {
    private final SpindleConfig config;
    private final PrometheusMeterRegistry prometheus;
    private final SmallRyeHealthReporter health;
    private final String host;
    private HttpServer server;

    public ManagementPort(SpindleConfig config, PrometheusMeterRegistry prometheus, SmallRyeHealthReporter health,
                          @ConfigProperty(name = "quarkus.http.host", defaultValue = "0.0.0.0") String httpHost) {
        this.config = config;
        this.prometheus = prometheus;
        this.health = health;
        this.host = config.managementHost().orElse(httpHost);
    }

    /** On the API port, /q/ is not found while a management port serves it. */
    void hideOnApiPort(@Observes Filters filters) {
        if (config.managementPort().isEmpty()) {
            return;
        }
        filters.register(ctx -> {
            String path = ctx.normalizedPath();
            if (path.equals("/q") || path.startsWith("/q/")) {
                ctx.response().setStatusCode(404).putHeader("Content-Type", "text/plain")
                        .end("not found: the metrics and health endpoints are on the management port " + config.managementPort().getAsInt() + "\n");
            } else {
                ctx.next();
            }
        }, 1000);
    }

    void start(@Observes StartupEvent event) {
        if (config.managementPort().isEmpty()) {
            return;
        }
        int port = config.managementPort().getAsInt();
        try {
            // the JDK's own server: Vert.x servers are instrumented by the HTTP metrics, which would count this port's scrapes
            server = HttpServer.create(new InetSocketAddress(host, port), 16);
        } catch (IOException e) {
            throw new IllegalStateException("spindle.management-port " + port + " on " + host + ": cannot listen (" + e.getMessage() + ")", e);
        }
        server.createContext("/", this::handle);
        server.setExecutor(Executors.newFixedThreadPool(2, Thread.ofPlatform().name("spindle-management-", 0).daemon().factory()));
        server.start();
        Log.infof("metrics and health on the management port: http://%s:%d/q/metrics, /q/health", host, server.getAddress().getPort());
    }

    void stop(@Observes ShutdownEvent event) {
        if (server != null) {
            server.stop(0);
        }
    }

    private void handle(HttpExchange ex) throws IOException {
        String p = ex.getRequestURI().getPath();
        String path = p.endsWith("/") && p.length() > 1 ? p.substring(0, p.length() - 1) : p;
        Supplier<SmallRyeHealth> check = switch (path) {
            case "/q/health" -> health::getHealth;
            case "/q/health/live" -> health::getLiveness;
            case "/q/health/ready" -> health::getReadiness;
            case "/q/health/started" -> health::getStartup;
            default -> null;
        };
        try (ex) {
            try {
                if (!ex.getRequestMethod().equals("GET") && !ex.getRequestMethod().equals("HEAD")) {
                    reply(ex, 405, "text/plain", "GET only\n");
                } else if (path.equals("/q/metrics")) {
                    reply(ex, 200, "text/plain; version=0.0.4; charset=utf-8", prometheus.scrape());
                } else if (check != null) {
                    SmallRyeHealth h = check.get();
                    reply(ex, h.isDown() ? 503 : 200, "application/json", h.getPayload().toString());
                } else {
                    reply(ex, 404, "text/plain", "not found: this port serves /q/metrics and /q/health\n");
                }
            } catch (RuntimeException e) {
                reply(ex, 500, "text/plain", String.valueOf(e));
            }
        }
    }

    private static void reply(HttpExchange ex, int status, String type, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", type);
        boolean head = ex.getRequestMethod().equals("HEAD");
        ex.sendResponseHeaders(status, head ? -1 : bytes.length == 0 ? -1 : bytes.length);
        if (!head && bytes.length > 0) {
            ex.getResponseBody().write(bytes);
        }
    }
}

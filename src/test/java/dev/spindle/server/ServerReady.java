package dev.spindle.server;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

/** Waits until the server under test has loaded its model (readiness up); the API answers 503 before. */
final class ServerReady {
    private ServerReady() {
    }

    static void await(URL anyUrlOfTheServer) {
        URI ready = URI.create(anyUrlOfTheServer.getProtocol() + "://" + anyUrlOfTheServer.getHost() + ":" + anyUrlOfTheServer.getPort() + "/q/health/ready");
        HttpClient http = HttpClient.newHttpClient();
        long deadline = System.currentTimeMillis() + 120_000;
        while (System.currentTimeMillis() < deadline) {
            try {
                if (http.send(HttpRequest.newBuilder(ready).build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
                Thread.sleep(50);
            } catch (Exception e) {
                try {
                    Thread.sleep(50);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
        throw new IllegalStateException("the server did not become ready: " + ready);
    }
}

package dev.spindle.server;

import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Iterator;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A bounded soak: 32 concurrent clients for {@code -DsoakSeconds} (default 60 in CI)
 * send streaming requests (a third cancelled part-way), plain requests and bad requests. Every
 * request must complete or get its explicit 4xx; nothing may fail with 5xx; afterwards no
 * sequence runs, every KV block is free, and the heap has not grown.
 */
@QuarkusTest
class SoakTest {
    @TestHTTPResource("/v1/chat/completions")
    URL chat;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(chat);
    }

    @Inject
    ModelService service;

    @Test
    void thirtyTwoClientsWithCancellationsAndBadRequests() throws Exception {
        long seconds = Long.getLong("soakSeconds", 60);
        HttpClient http = HttpClient.newBuilder().executor(Executors.newVirtualThreadPerTaskExecutor()).build();
        Map<String, AtomicInteger> outcomes = new ConcurrentHashMap<>();
        long heapBefore = usedHeapAfterGc();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        try (ExecutorService clients = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int c = 0; c < 32; c++) {
                int client = c;
                clients.submit(() -> {
                    Random rnd = new Random(client);
                    while (System.nanoTime() < end) {
                        int kind = rnd.nextInt(10);
                        String outcome;
                        try {
                            outcome = kind < 5 ? stream(http, rnd) : kind < 8 ? plain(http, rnd) : bad(http, rnd);
                        } catch (Exception e) {
                            outcome = "client-exception " + e.getClass().getSimpleName();
                        }
                        outcomes.computeIfAbsent(outcome, k -> new AtomicInteger()).incrementAndGet();
                    }
                    return null;
                });
            }
        }
        System.out.println("[soak] " + seconds + " s, 32 clients: " + outcomes);
        for (String o : outcomes.keySet()) {
            assertTrue(o.equals("ok") || o.equals("cancelled") || o.equals("400"), "unexpected outcome " + o + ": " + outcomes);
        }
        long deadline = System.currentTimeMillis() + 20_000;
        while ((service.engine().stats().running() > 0 || service.engine().stats().waiting() > 0) && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        var st = service.engine().stats();
        assertEquals(0, st.running());
        assertEquals(st.kvBlocksTotal(), st.kvBlocksFree(), "every KV block is back");
        long heapAfter = usedHeapAfterGc();
        System.out.printf("[soak] heap after GC: %d MB before, %d MB after%n", heapBefore >> 20, heapAfter >> 20);
        assertTrue(heapAfter < heapBefore + (96L << 20), "heap grew from " + (heapBefore >> 20) + " to " + (heapAfter >> 20) + " MB");
    }

    private HttpRequest.Builder post(String body) {
        return HttpRequest.newBuilder(URI.create(chat.toString())).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body));
    }

    private String question(Random rnd) {
        return "{\"role\": \"user\", \"content\": \"What is " + rnd.nextInt(90) + " + " + rnd.nextInt(90) + "?\"}";
    }

    private String stream(HttpClient http, Random rnd) throws Exception {
        boolean cancel = rnd.nextInt(3) == 0;
        String body = "{\"messages\": [" + question(rnd) + "], \"stream\": true, \"max_tokens\": " + (10 + rnd.nextInt(150))
                + ", \"temperature\": 0.8, \"ignore_eos\": " + cancel + "}";
        HttpResponse<Stream<String>> r = http.send(post(body).build(), HttpResponse.BodyHandlers.ofLines());
        if (r.statusCode() != 200) {
            r.body().close();
            return String.valueOf(r.statusCode());
        }
        int stopAfter = cancel ? 2 + rnd.nextInt(10) : Integer.MAX_VALUE;
        try (Stream<String> lines = r.body()) {
            Iterator<String> it = lines.iterator();
            int data = 0;
            while (it.hasNext()) {
                String line = it.next();
                if (line.equals("data: [DONE]")) {
                    return "ok";
                }
                if (line.startsWith("data: ") && ++data >= stopAfter) {
                    return "cancelled";
                }
            }
        }
        return "stream-ended-without-done";
    }

    private String plain(HttpClient http, Random rnd) throws Exception {
        HttpResponse<String> r = http.send(post("{\"messages\": [" + question(rnd) + "], \"max_tokens\": 40}").build(),
                HttpResponse.BodyHandlers.ofString());
        return r.statusCode() == 200 && r.body().contains("\"finish_reason\"") ? "ok" : String.valueOf(r.statusCode());
    }

    private String bad(HttpClient http, Random rnd) throws Exception {
        String[] bodies = {"{not json", "{\"messages\": []}", "{\"messages\": [" + question(rnd) + "], \"temperature\": \"hot\"}",
                "{\"messages\": [" + question(rnd) + "], \"max_tokens\": -1}", "[1, 2, 3]",
                "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": \"a\"}]}"};
        HttpResponse<String> r = http.send(post(bodies[rnd.nextInt(bodies.length)]).build(), HttpResponse.BodyHandlers.ofString());
        return String.valueOf(r.statusCode());
    }

    private static long usedHeapAfterGc() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
        Runtime rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }
}

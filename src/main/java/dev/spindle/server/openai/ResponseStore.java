package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.SpindleConfig;
import jakarta.enterprise.context.ApplicationScoped;

import java.time.Duration;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Responses API's memory of recent responses, bounded in count and age
 * ({@code spindle.responses.store-max-entries}, {@code spindle.responses.store-ttl}): what
 * {@code previous_response_id} continues from and {@code GET /v1/responses/{id}} returns. Each
 * entry keeps the response object and the conversation it answered, as chat messages, so that a
 * follow-up is rendered from the same turns. In memory only: a restart forgets them.
 */
@ApplicationScoped
public class ResponseStore {
    /** A stored response and the chat messages it answered (its instructions excluded: they are not carried over). */
    public record Entry(ObjectNode response, ArrayNode messages, long storedAtNanos) {
    }

    private final int maxEntries;
    private final long ttlNanos;
    private final Map<String, Entry> entries = new LinkedHashMap<>(16, 0.75f, false);

    @jakarta.inject.Inject
    public ResponseStore(SpindleConfig config) {
        this(config.responses().storeMaxEntries(), config.responses().storeTtl());
    }

    ResponseStore(int maxEntries, Duration ttl) {
        if (maxEntries < 0) {
            throw new IllegalArgumentException("spindle.responses.store-max-entries must be >= 0, got " + maxEntries);
        }
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("spindle.responses.store-ttl must be positive, got " + ttl);
        }
        this.maxEntries = maxEntries;
        this.ttlNanos = ttl.toNanos();
    }

    /** Whether responses are kept at all. */
    public boolean enabled() {
        return maxEntries > 0;
    }

    public synchronized void put(String id, ObjectNode response, ArrayNode messages) {
        if (maxEntries == 0) {
            return;
        }
        expire();
        entries.remove(id);
        entries.put(id, new Entry(response.deepCopy(), messages.deepCopy(), System.nanoTime()));
        while (entries.size() > maxEntries) {
            Iterator<String> oldest = entries.keySet().iterator();
            oldest.next();
            oldest.remove();
        }
    }

    /** The entry, or null when unknown or expired. */
    public synchronized Entry get(String id) {
        expire();
        return entries.get(id);
    }

    public synchronized boolean remove(String id) {
        expire();
        return entries.remove(id) != null;
    }

    private void expire() {
        long now = System.nanoTime();
        entries.values().removeIf(e -> now - e.storedAtNanos() > ttlNanos);
    }
}

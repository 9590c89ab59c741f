package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** The server's one JSON mapper (thread-safe once configured; every API reads and writes through it), and SSE framing. */
public final class Json {
    public static final ObjectMapper JSON = new ObjectMapper();

    private Json() {
    }

    /** One server-sent event carrying {@code data}. */
    public static String sse(JsonNode data) {
        return "data: " + data.toString() + "\n\n";
    }
}

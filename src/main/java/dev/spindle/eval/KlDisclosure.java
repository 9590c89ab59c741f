package dev.spindle.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Optional;

/**
 * The KL Spindle has measured for each lossy configuration on its bundled model ({@code kl/measured.json}, written from
 * {@code spindle kl} runs and checked against a fresh run by the tests): what the start log and {@code /v1/models} disclose
 * beside the format served.
 */
public final class KlDisclosure {
    /** The shipped measurements. */
    public static final String SHIPPED = "/kl/measured.json";
    private final JsonNode root;

    private KlDisclosure(JsonNode root) {
        this.root = root;
    }

    /** The measurements shipped in Spindle's jar, read once (the start log and every /v1/models answer give them). */
    public static KlDisclosure shipped() {
        return Shipped.INSTANCE;
    }

    private static final class Shipped {
        static final KlDisclosure INSTANCE = read();
    }

    private static KlDisclosure read() {
        try (InputStream in = KlDisclosure.class.getResourceAsStream(SHIPPED)) {
            if (in == null) {
                throw new IllegalStateException(SHIPPED + " is missing from the classpath");
            }
            return new KlDisclosure(new ObjectMapper().readTree(in));
        } catch (IOException e) {
            throw new UncheckedIOException(SHIPPED + ": " + e.getMessage(), e);
        }
    }

    /** The measurement of weights {@code weights} (a --quantization label) with a {@code kvCache} KV cache, if one was made. */
    public Optional<JsonNode> find(String weights, String kvCache) {
        for (JsonNode m : root.path("measurements")) {
            if (m.path("weights").asText().equals(weights) && m.path("kv_cache").asText().equals(kvCache)) {
                return Optional.of(m);
            }
        }
        return Optional.empty();
    }

    /** How the figures were measured (the corpus, the command). */
    public String about() {
        return root.path("about").asText();
    }

    /** One line for a start log: the measured mean KL by category, or why there is none. */
    public String line(String weights, String kvCache) {
        if (weights.equals("none") && kvCache.equals("bf16")) {
            return "served as published (no KL to disclose)";
        }
        return find(weights, kvCache).map(m -> "lossy: KL against the bf16 release measured on " + m.path("model").asText() + " (" + m.path("backend").asText()
                        + ", the shipped corpus), mean by category " + m.path("kl_mean"))
                .orElse("lossy: no KL measured for this configuration yet (run spindle kl)");
    }
}

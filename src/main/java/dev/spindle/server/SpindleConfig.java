package dev.spindle.server;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;

import java.util.Optional;
import java.util.OptionalInt;

/**
 * The server's typed configuration ({@code spindle.*} in application.properties, or the
 * {@code serve} command's flags). No environment-variable switches.
 */
@ConfigMapping(prefix = "spindle")
public interface SpindleConfig {
    /** The Hugging Face model directory to serve. */
    @WithDefault("models/spindle-chat-target")
    String model();

    /** safetensors, or dummy (seeded random weights of config.json's shapes). */
    @WithDefault("safetensors")
    String loadFormat();

    /** The model id clients use; defaults to the directory name. */
    Optional<String> servedModelName();

    /** CPU backend threads; defaults to all cores. */
    OptionalInt threads();

    /** KV cache capacity in tokens (all sequences together). */
    @WithDefault("32768")
    int kvCacheTokens();

    /** Tokens per KV block. */
    @WithDefault("16")
    int blockSize();

    /** Sequences decoded together at most. */
    @WithDefault("32")
    int maxNumSeqs();

    /** Tokens computed per engine step at most (prefill chunks are cut to fit). */
    @WithDefault("512")
    int maxNumBatchedTokens();

    /** When set, /v1 requests need {@code Authorization: Bearer <key>}. */
    Optional<String> apiKey();

    /** Requests waiting for admission at most; beyond it new requests get 429 with Retry-After. */
    @WithDefault("256")
    int maxWaitingRequests();

    /** max_tokens when a request gives none. */
    @WithDefault("1024")
    int defaultMaxTokens();
}

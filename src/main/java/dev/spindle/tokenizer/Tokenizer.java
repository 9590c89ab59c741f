package dev.spindle.tokenizer;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * A model's tokenizer: its {@code tokenizer.json} run by HF's own Rust implementation
 * (through DJL), so ids match HF exactly; or a GGUF file's vocabulary tokenized as llama.cpp
 * tokenizes it ({@link SpmTokenizer}), so ids match llama.cpp's for that file. Rendered chat
 * prompts are encoded without added special tokens (the template writes them). Truncation and
 * padding are off.
 */
public final class Tokenizer implements AutoCloseable {
    /** One of the two: the Hugging Face tokenizer, or a GGUF vocabulary. */
    private final HuggingFaceTokenizer hf;
    private final SpmTokenizer spm;
    /** With a GGUF vocabulary: the BOS id encodeWithSpecialTokens puts first (-1: none). */
    private final int bos;
    private final Map<String, Integer> addedTokens;
    private final Set<Integer> specialIds;
    /** A tokenizer.json made in memory (a GGUF gpt2-style vocabulary), or null. */
    private final JsonNode json;

    /** Held so that its level stays set (the log manager keeps loggers weakly). */
    private static final java.util.logging.Logger DJL_CUDA_PROBE = java.util.logging.Logger.getLogger("ai.djl.util.cuda.CudaUtils");

    static {
        // DJL chooses its native tokenizer build by the machine: where CUDA is present it wants a CUDA
        // build, which its jar does not ship, and tries to download one (so the server could not start on
        // an offline GPU node). Tokenizing runs on the CPU: use the CPU build from the jar, never the network.
        if (System.getProperty("RUST_FLAVOR") == null) {
            System.setProperty("RUST_FLAVOR", "cpu");
        }
        System.setProperty("ai.djl.offline", "true");
        // DJL also probes for a CUDA runtime on the way and warns where none is usable: a CPU build needs none
        DJL_CUDA_PROBE.setLevel(java.util.logging.Level.SEVERE);
    }

    private Tokenizer(HuggingFaceTokenizer hf, SpmTokenizer spm, int bos, Map<String, Integer> addedTokens, Set<Integer> specialIds, JsonNode json) {
        this.json = json;
        this.hf = hf;
        this.spm = spm;
        this.bos = bos;
        this.addedTokens = addedTokens;
        this.specialIds = specialIds;
    }

    /**
     * A GGUF file's vocabulary: its control and user-defined pieces are the added tokens (control ones special), and
     * {@link #encodeWithSpecialTokens} puts {@code bos} first where the file says to add it ({@code bos} -1: never).
     */
    public static Tokenizer of(SpmTokenizer spm, int bos) {
        Map<String, Integer> added = new HashMap<>();
        Set<Integer> special = new HashSet<>();
        for (int id = 0; id < spm.size(); id++) {
            int t = spm.type(id);
            if (t == SpmTokenizer.CONTROL || t == SpmTokenizer.USER_DEFINED) {
                added.putIfAbsent(spm.piece(id), id);
            }
            if (t == SpmTokenizer.CONTROL || t == SpmTokenizer.UNKNOWN) {
                special.add(id);
            }
        }
        return new Tokenizer(null, spm, bos, Map.copyOf(added), Set.copyOf(special), null);
    }

    /** The GGUF vocabulary behind this tokenizer, or null (a tokenizer.json). */
    public SpmTokenizer spm() {
        return spm;
    }

    /**
     * A tokenizer.json made in memory (a GGUF file's gpt2-style vocabulary: {@link GgufBpe}), run by HF's implementation;
     * {@link #encodeWithSpecialTokens} puts {@code bos} first (-1: never).
     */
    public static Tokenizer fromJson(JsonNode json, String origin, int bos) {
        Path tmp = null;
        try {
            tmp = Files.createTempFile("spindle-tokenizer", ".json");
            Files.writeString(tmp, new ObjectMapper().writeValueAsString(json));
            return load(tmp, json, origin, bos, json);
        } catch (IOException e) {
            throw new TokenizerException(origin + ": could not write its tokenizer for the tokenizer library: " + e.getMessage(), e);
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException ignored) {
                    // a temporary file left behind is harmless
                }
            }
        }
    }

    /** The tokenizer.json this tokenizer was made from in memory (a GGUF vocabulary's), or null. */
    public JsonNode json() {
        return json;
    }

    /** Loads {@code dir/tokenizer.json}. */
    public static Tokenizer load(Path dir) {
        Path file = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(file)) {
            throw new TokenizerException(file + ": not found (the model directory needs a tokenizer.json)");
        }
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            throw new TokenizerException(file + ": not valid JSON: " + e.getMessage(), e);
        }
        return load(file, root, file.toString(), -1, null);
    }

    /**
     * The tokenizer of {@code file}, whose parsed content is {@code root}: its added tokens read from root, the rest by HF's
     * implementation from the file; {@code inMemory} kept where the file was written from it ({@link #fromJson}).
     */
    private static Tokenizer load(Path file, JsonNode root, String origin, int bos, JsonNode inMemory) {
        if (root == null || !root.has("model")) {
            throw new TokenizerException(origin + ": not a Hugging Face tokenizer.json (no 'model' field)");
        }
        Map<String, Integer> added = new HashMap<>();
        Set<Integer> special = new HashSet<>();
        for (JsonNode t : root.path("added_tokens")) {
            added.put(t.get("content").asText(), t.get("id").asInt());
            if (t.path("special").asBoolean(false)) {
                special.add(t.get("id").asInt());
            }
        }
        try {
            HuggingFaceTokenizer hf = HuggingFaceTokenizer.builder()
                    .optTokenizerPath(file)
                    .optAddSpecialTokens(false)
                    .optTruncation(false)
                    .optPadding(false)
                    .build();
            return new Tokenizer(hf, null, bos, Map.copyOf(added), Set.copyOf(special), inMemory);
        } catch (IOException | RuntimeException e) {
            if (String.valueOf(e.getMessage()).contains("native library")) {
                throw new TokenizerException(origin + ": the tokenizer's native library (DJL, " + System.getProperty("os.name") + " "
                        + System.getProperty("os.arch") + ") could not be loaded: " + e.getMessage(), e);
            }
            throw new TokenizerException(origin + ": the tokenizer library refused it: " + e.getMessage(), e);
        }
    }

    /** Ids of {@code text} without special tokens (for a rendered chat prompt). */
    public int[] encode(String text) {
        if (spm != null) {
            return spm.encode(sanitize(text), true);
        }
        return toInts(hf.encode(sanitize(text), false, false));
    }

    /** Ids with the post-processor's special tokens (Nanbeige: a leading {@code <|im_start|>}). */
    public int[] encodeWithSpecialTokens(String text) {
        int[] ids = spm != null ? spm.encode(sanitize(text), true) : toInts(hf.encode(sanitize(text), true, false));
        if (bos < 0) {
            return ids; // a tokenizer.json's post-processor adds its own
        }
        int[] out = new int[ids.length + 1];
        out[0] = bos;
        System.arraycopy(ids, 0, out, 1, ids.length);
        return out;
    }

    public String decode(int[] ids, boolean skipSpecialTokens) {
        if (spm != null) {
            return spm.decode(ids, skipSpecialTokens);
        }
        long[] l = new long[ids.length];
        for (int i = 0; i < ids.length; i++) {
            l[i] = ids[i];
        }
        return hf.decode(l, skipSpecialTokens);
    }

    /** Id of an added token such as {@code <|im_end|>}, or -1. */
    public int addedTokenId(String content) {
        return addedTokens.getOrDefault(content, -1);
    }

    public boolean isSpecial(int id) {
        return specialIds.contains(id);
    }

    private static int[] toInts(Encoding e) {
        long[] ids = e.getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            out[i] = (int) ids[i];
        }
        return out;
    }

    /** Lone UTF-16 surrogates cannot be encoded as UTF-8: they become U+FFFD, as a lenient decoder would. */
    static String sanitize(String s) {
        StringBuilder b = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean lone = Character.isHighSurrogate(c) ? i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))
                    : Character.isLowSurrogate(c) && (i == 0 || !Character.isHighSurrogate(s.charAt(i - 1)));
            if (Character.isHighSurrogate(c) && !lone) {
                if (b != null) {
                    b.append(c).append(s.charAt(i + 1));
                }
                i++;
                continue;
            }
            if (lone && b == null) {
                b = new StringBuilder(s.length()).append(s, 0, i);
            }
            if (b != null) {
                b.append(lone ? '\uFFFD' : c);
            }
        }
        return b == null ? s : b.toString();
    }

    @Override
    public void close() {
        if (hf != null) {
            hf.close();
        }
    }
}

package dev.spindle.wiring;

import dev.spindle.chat.ChatTemplate;
import dev.spindle.grammar.TokenTexts;
import dev.spindle.model.ModelLoadException;
import dev.spindle.model.gguf.GgufFile;
import dev.spindle.tokenizer.GgufBpe;
import dev.spindle.tokenizer.SpmTokenizer;
import dev.spindle.tokenizer.Tokenizer;
import dev.spindle.tokenizer.TokenizerException;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a model gives besides its weights, whichever form it comes in: a Hugging Face directory (tokenizer.json,
 * tokenizer_config.json, chat_template.jinja) or a GGUF file, whose metadata carries its vocabulary
 * ({@code tokenizer.ggml.*}, tokenized as llama.cpp tokenizes it) and its chat template ({@code tokenizer.chat_template}).
 */
public final class ModelFiles {
    private ModelFiles() {
    }

    /** Whether {@code model} is a GGUF file rather than a model directory. */
    public static boolean isGguf(Path model) {
        return Files.isRegularFile(model) && model.getFileName().toString().endsWith(".gguf");
    }

    /** The model's tokenizer. */
    public static Tokenizer tokenizer(Path model) {
        if (!isGguf(model)) {
            return Tokenizer.load(model);
        }
        try (GgufFile f = GgufFile.open(model)) {
            if (kind(f).equals("gpt2")) {
                // llama.cpp adds a BOS to a gpt2-style vocabulary's text where the file (or llama3's pre-tokenizer) says to
                Object flag = f.metadata().get("tokenizer.ggml.add_bos_token");
                boolean addBos = flag instanceof Boolean b ? b : f.string("tokenizer.ggml.pre").map(p -> p.startsWith("llama")).orElse(false);
                return Tokenizer.fromJson(bpeJson(f), f.path().toString(), addBos ? f.integer("tokenizer.ggml.bos_token_id").orElse(-1L).intValue() : -1);
            }
            // llama.cpp adds a BOS to a SentencePiece-style vocabulary's text unless the file says not to
            boolean addBos = !Boolean.FALSE.equals(f.metadata().get("tokenizer.ggml.add_bos_token"));
            return Tokenizer.of(vocabulary(f), addBos ? f.integer("tokenizer.ggml.bos_token_id").orElse(-1L).intValue() : -1);
        }
    }

    /** tokenizer.ggml.model: "llama" (SentencePiece-style) or "gpt2" (byte-level BPE); other kinds are refused by name. */
    private static String kind(GgufFile f) {
        String kind = f.string("tokenizer.ggml.model").orElseThrow(() -> new TokenizerException(f.path() + ": no tokenizer.ggml.model: the file"
                + " carries no vocabulary"));
        if (!kind.equals("llama") && !kind.equals("gpt2")) {
            throw new TokenizerException(f.path() + ": tokenizer.ggml.model is '" + kind + "'; Spindle reads SentencePiece-style (\"llama\") and"
                    + " byte-level BPE (\"gpt2\") GGUF vocabularies");
        }
        return kind;
    }

    /** A gpt2-style vocabulary's tokens as strings. */
    private static List<String> tokens(GgufFile f) {
        List<?> tokens = f.list("tokenizer.ggml.tokens").orElseThrow(() -> new TokenizerException(f.path() + ": tokenizer.ggml.tokens is missing"));
        List<String> out = new ArrayList<>(tokens.size());
        for (int i = 0; i < tokens.size(); i++) {
            if (!(tokens.get(i) instanceof String p)) {
                throw new TokenizerException(f.path() + ": tokenizer.ggml.tokens[" + i + "] is not a string");
            }
            out.add(p);
        }
        return out;
    }

    /** The tokenizer.json of a gpt2-style GGUF vocabulary ({@link GgufBpe}). */
    private static com.fasterxml.jackson.databind.node.ObjectNode bpeJson(GgufFile f) {
        List<String> tokens = tokens(f);
        List<?> types = f.list("tokenizer.ggml.token_type").orElse(List.of());
        int[] t = new int[tokens.size()];
        for (int i = 0; i < t.length; i++) {
            t[i] = i < types.size() && types.get(i) instanceof Long l ? l.intValue() : SpmTokenizer.NORMAL;
        }
        List<?> merges = f.list("tokenizer.ggml.merges").orElseThrow(() -> new TokenizerException(f.path() + ": tokenizer.ggml.merges is missing"
                + " (a gpt2-style vocabulary needs its merges)"));
        List<String> m = new ArrayList<>(merges.size());
        for (Object o : merges) {
            m.add(String.valueOf(o));
        }
        String pre = f.string("tokenizer.ggml.pre").orElseThrow(() -> new TokenizerException(f.path() + ": tokenizer.ggml.pre is missing (llama.cpp"
                + " would fall back to its default pre-tokenizer, which Spindle does not implement; the file's converter names one)"));
        return GgufBpe.tokenizerJson(tokens, t, m, pre, f.path().toString());
    }

    /** The GGUF file's SentencePiece-style vocabulary ({@code tokenizer.ggml.model} "llama"); other kinds are refused by name. */
    static SpmTokenizer vocabulary(GgufFile f) {
        if (!kind(f).equals("llama")) {
            throw new TokenizerException(f.path() + ": tokenizer.ggml.model is '" + kind(f) + "', not a SentencePiece-style vocabulary");
        }
        List<?> tokens = f.list("tokenizer.ggml.tokens").orElseThrow(() -> new TokenizerException(f.path() + ": tokenizer.ggml.tokens is missing"));
        List<?> scores = f.list("tokenizer.ggml.scores").orElse(List.of()), types = f.list("tokenizer.ggml.token_type").orElse(List.of());
        List<String> pieces = new ArrayList<>(tokens.size());
        float[] s = new float[tokens.size()];
        int[] t = new int[tokens.size()];
        for (int i = 0; i < tokens.size(); i++) {
            if (!(tokens.get(i) instanceof String p)) {
                throw new TokenizerException(f.path() + ": tokenizer.ggml.tokens[" + i + "] is not a string");
            }
            pieces.add(p);
            s[i] = i < scores.size() && scores.get(i) instanceof Double d ? d.floatValue() : 0f;
            t[i] = i < types.size() && types.get(i) instanceof Long l ? l.intValue() : SpmTokenizer.NORMAL;
        }
        Object prefix = f.metadata().get("tokenizer.ggml.add_space_prefix");
        return new SpmTokenizer(pieces, s, t, !(prefix instanceof Boolean b) || b);
    }

    /** The model's chat template. */
    public static ChatTemplate chatTemplate(Path model) {
        if (!isGguf(model)) {
            return ChatTemplate.fromModelDir(model);
        }
        try (GgufFile f = GgufFile.open(model)) {
            String source = f.string("tokenizer.chat_template").orElseThrow(() -> new ModelLoadException(model + ": no tokenizer.chat_template"
                    + " in the file's metadata"));
            List<String> pieces = kind(f).equals("gpt2") ? tokens(f) : null;
            SpmTokenizer v = pieces == null ? vocabulary(f) : null;
            java.util.function.IntFunction<String> piece = id -> pieces != null ? pieces.get(id) : v.piece(id);
            Map<String, String> special = new LinkedHashMap<>();
            f.integer("tokenizer.ggml.bos_token_id").ifPresent(id -> special.put("bos_token", piece.apply(id.intValue())));
            f.integer("tokenizer.ggml.eos_token_id").ifPresent(id -> special.put("eos_token", piece.apply(id.intValue())));
            return new ChatTemplate(source, special);
        }
    }

    /** Each token's text for constrained decoding ({@code vocabSize} ids). */
    public static TokenTexts tokenTexts(Path model, Tokenizer tokenizer, int vocabSize) {
        SpmTokenizer v = tokenizer.spm();
        if (tokenizer.json() != null) {
            return TokenTexts.of(tokenizer.json(), vocabSize, model.toString());
        }
        if (v == null) {
            return TokenTexts.load(model.resolve("tokenizer.json"), vocabSize);
        }
        String[] texts = new String[vocabSize];
        for (int id = 0; id < Math.min(vocabSize, v.size()); id++) {
            String p = v.piece(id);
            texts[id] = switch (v.type(id)) {
                case SpmTokenizer.NORMAL, SpmTokenizer.BYTE -> TokenTexts.pieceText(p);
                case SpmTokenizer.USER_DEFINED -> p;
                default -> null;
            };
        }
        return TokenTexts.of(texts);
    }
}

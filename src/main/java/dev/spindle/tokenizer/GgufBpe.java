package dev.spindle.tokenizer;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.List;
import java.util.Map;

/**
 * A GGUF file's gpt2-style vocabulary ({@code tokenizer.ggml.model} "gpt2": byte-level BPE tokens, merges, token types and
 * {@code tokenizer.ggml.pre}) as the Hugging Face tokenizer.json that tokenizes as llama.cpp does: a byte-level BPE model
 * (merges by rank; with llama3's pre-tokenizer a word found whole in the vocabulary is taken whole, llama.cpp's
 * {@code ignore_merges}), the pre-tokenizer's split pattern (the one llama.cpp applies for that {@code pre}, as the model's
 * own tokenizer.json writes it), then the byte-to-unicode mapping; control tokens as special added tokens, user-defined ones
 * as plain added tokens (both matched whole, as llama.cpp's special-token parsing does). A {@code pre} not listed here is
 * refused by name.
 */
public final class GgufBpe {
    /** The split pattern of each supported pre-tokenizer (tokenizer.ggml.pre), by name. */
    static final Map<String, String> PATTERNS = Map.of(
            "gpt-2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
            "llama-bpe", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            "qwen2", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    /** Other names llama.cpp gives the same pre-tokenizers. */
    static final Map<String, String> ALIASES = Map.of("llama3", "llama-bpe", "llama-v3", "llama-bpe", "deepseek-r1-qwen", "qwen2");

    private GgufBpe() {
    }

    /** The pre-tokenizer {@code pre} names, or an exception saying which ones Spindle has. */
    static String pattern(String pre, String origin) {
        String p = PATTERNS.get(ALIASES.getOrDefault(pre, pre));
        if (p == null) {
            throw new TokenizerException(origin + ": tokenizer.ggml.pre is '" + pre + "'; Spindle tokenizes gpt2-style GGUF vocabularies with the"
                    + " gpt-2, llama-bpe (llama3) and qwen2 pre-tokenizers so far");
        }
        return p;
    }

    /**
     * The tokenizer.json of a gpt2-style GGUF vocabulary.
     *
     * @param types  each token's llama.cpp type ({@link SpmTokenizer#NORMAL}, {@link SpmTokenizer#CONTROL}, ...)
     * @param merges "left right" pairs in rank order
     */
    public static ObjectNode tokenizerJson(List<String> tokens, int[] types, List<String> merges, String pre, String origin) {
        String pattern = pattern(pre, origin);
        ObjectMapper json = new ObjectMapper();
        ObjectNode root = json.createObjectNode().put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        for (int id = 0; id < tokens.size(); id++) {
            if (types[id] == SpmTokenizer.CONTROL || types[id] == SpmTokenizer.USER_DEFINED) {
                added.addObject().put("id", id).put("content", tokens.get(id)).put("single_word", false).put("lstrip", false).put("rstrip", false)
                        .put("normalized", false).put("special", types[id] == SpmTokenizer.CONTROL);
            }
        }
        root.putNull("normalizer");
        ObjectNode preTok = root.putObject("pre_tokenizer").put("type", "Sequence");
        ArrayNode steps = preTok.putArray("pretokenizers");
        ObjectNode split = steps.addObject().put("type", "Split");
        split.putObject("pattern").put("Regex", pattern);
        split.put("behavior", "Isolated").put("invert", false);
        steps.addObject().put("type", "ByteLevel").put("add_prefix_space", false).put("trim_offsets", true).put("use_regex", false);
        root.putNull("post_processor");
        root.putObject("decoder").put("type", "ByteLevel").put("add_prefix_space", true).put("trim_offsets", true).put("use_regex", true);
        ObjectNode model = root.putObject("model").put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false).put("byte_fallback", false).put("ignore_merges", ALIASES.getOrDefault(pre, pre).equals("llama-bpe"));
        ObjectNode vocab = model.putObject("vocab");
        for (int id = 0; id < tokens.size(); id++) {
            if (!vocab.has(tokens.get(id))) {
                vocab.put(tokens.get(id), id);
            }
        }
        ArrayNode m = model.putArray("merges");
        for (int i = 0; i < merges.size(); i++) {
            String s = merges.get(i);
            int space = s.indexOf(' ', 1);
            if (space < 0) {
                throw new TokenizerException(origin + ": tokenizer.ggml.merges[" + i + "] = '" + s + "' is not two tokens separated by a space");
            }
            m.addArray().add(s.substring(0, space)).add(s.substring(space + 1));
        }
        return root;
    }
}

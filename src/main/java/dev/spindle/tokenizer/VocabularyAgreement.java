package dev.spindle.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

/**
 * Whether a draft model can draft for a target: both {@code tokenizer.json} files must map the same
 * token strings to the same ids (the drafter's may stop earlier) and declare the same added
 * tokens with the same ids and special flags. A drafter whose ids meant other text would propose
 * tokens the target reads as something else.
 */
public final class VocabularyAgreement {
    private VocabularyAgreement() {
    }

    /** @throws IllegalArgumentException naming both models and the first difference */
    public static void check(Path targetDir, Path draftDir) {
        Map<Integer, String> target = ids(targetDir), draft = ids(draftDir);
        for (Map.Entry<Integer, String> e : draft.entrySet()) {
            String t = target.get(e.getKey());
            if (!e.getValue().equals(t)) {
                throw new IllegalArgumentException("the draft model " + draftDir + " does not share the tokenizer of " + targetDir + ": id " + e.getKey()
                        + " is " + quote(e.getValue()) + " in the drafter and " + (t == null ? "absent" : quote(t)) + " in the target");
            }
        }
        for (Map.Entry<Integer, String> e : target.entrySet()) {
            if (e.getValue().startsWith("added:") && !draft.containsKey(e.getKey())) {
                throw new IllegalArgumentException("the draft model " + draftDir + " does not share the tokenizer of " + targetDir + ": the target's "
                        + quote(e.getValue()) + " (id " + e.getKey() + ") is missing from the drafter");
            }
        }
    }

    /** id -> token text (vocabulary entries) or "added:" + text + (special) for added tokens. */
    private static Map<Integer, String> ids(Path dir) {
        Path file = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(file + " not found: a draft model and its target each need their tokenizer.json to be compared");
        }
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": not valid JSON: " + e.getMessage(), e);
        }
        Map<Integer, String> ids = new TreeMap<>();
        JsonNode vocab = root.path("model").path("vocab");
        if (!vocab.isObject()) {
            throw new IllegalArgumentException(file + ": model.vocab is not an object of token -> id");
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = vocab.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            ids.put(e.getValue().asInt(), e.getKey());
        }
        for (JsonNode a : root.path("added_tokens")) {
            ids.put(a.path("id").asInt(), "added:" + a.path("content").asText() + (a.path("special").asBoolean() ? " (special)" : ""));
        }
        return ids;
    }

    private static String quote(String s) {
        return "\"" + s.replace("\"", "\\\"") + "\"";
    }
}

package dev.spindle.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.tokenizer.Tokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The sequences {@code spindle kl} scores, by category: one JSON object a line, {@code category}, {@code id}, and either
 * {@code messages} (with {@code tools} where the turns call them), rendered by the model's own chat template with every
 * turn in it, assistant turns included (teacher forcing scores the whole conversation), or {@code text}, tokenized as
 * it is. The corpus shipped with Spindle is {@code kl/corpus.jsonl} (its README says what each category holds).
 */
public final class KlCorpus {
    /** A sequence to score: its category, its id in the corpus, its tokens. */
    public record Entry(String category, String id, int[] ids) {
    }

    /** The corpus shipped in Spindle's jar. */
    public static final String SHIPPED = "/kl/corpus.jsonl";

    private KlCorpus() {
    }

    /** Reads and tokenizes a corpus; {@code source} names it in messages. */
    public static List<Entry> read(InputStream in, String source, ChatTemplate template, Tokenizer tok) {
        ObjectMapper json = new ObjectMapper();
        List<Entry> out = new ArrayList<>();
        String text;
        try {
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(source + ": " + e.getMessage(), e);
        }
        int line = 0;
        for (String l : text.split("\n")) {
            line++;
            if (l.isBlank()) {
                continue;
            }
            JsonNode e;
            try {
                e = json.readTree(l);
            } catch (IOException ex) {
                throw new IllegalArgumentException(source + " line " + line + ": not JSON: " + ex.getMessage());
            }
            String category = field(e, "category", source, line), id = e.has("id") ? e.get("id").asText() : category + "-" + line;
            int[] ids;
            if (e.has("messages")) {
                Map<String, Object> vars = new LinkedHashMap<>();
                vars.put("add_generation_prompt", false);
                String rendered = template.render((List<?>) JsonValues.toValue(e.get("messages")),
                        e.has("tools") ? (List<?>) JsonValues.toValue(e.get("tools")) : null, vars);
                ids = tok.encode(rendered);
            } else if (e.has("text")) {
                ids = tok.encode(e.get("text").asText());
            } else {
                throw new IllegalArgumentException(source + " line " + line + ": an entry has \"messages\" or \"text\"");
            }
            if (ids.length < 2) {
                throw new IllegalArgumentException(source + " line " + line + " (" + id + "): fewer than 2 tokens to score");
            }
            out.add(new Entry(category, id, ids));
        }
        if (out.isEmpty()) {
            throw new IllegalArgumentException(source + ": no entries");
        }
        return out;
    }

    private static String field(JsonNode e, String name, String source, int line) {
        JsonNode v = e.get(name);
        if (v == null || !v.isTextual() || v.asText().isBlank()) {
            throw new IllegalArgumentException(source + " line " + line + ": \"" + name + "\" (a non-empty string) is required");
        }
        return v.asText();
    }
}

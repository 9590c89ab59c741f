package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.jinja.Template;
import dev.spindle.chat.jinja.TemplateException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's own chat template, rendered as HF's {@code apply_chat_template} renders it:
 * {@code messages}, {@code tools} and {@code documents} (None when absent),
 * {@code add_generation_prompt}, the tokenizer's special tokens ({@code bos_token},
 * {@code eos_token}, ... from tokenizer_config.json; one the tokenizer lacks is left
 * undefined, as HF leaves it out of its special tokens map), and any template kwargs
 * ({@code enable_thinking}, {@code preserve_thinking}, {@code tool_call_format}, ...).
 */
public final class ChatTemplate {
    /** The special tokens HF's special_tokens_map can hold, each passed to the template under its own name. */
    private static final List<String> SPECIAL_TOKENS = List.of("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token");

    private final Template template;
    private final String source;
    private final Map<String, String> specialTokens;

    public ChatTemplate(String source, String bosToken, String eosToken) {
        this(source, tokens(bosToken, eosToken));
    }

    /** @param specialTokens token name ("bos_token", ...) to its text; absent or null ones stay undefined in the template */
    public ChatTemplate(String source, Map<String, String> specialTokens) {
        this.source = source;
        this.template = Template.compile(source);
        this.specialTokens = new LinkedHashMap<>();
        specialTokens.forEach((k, v) -> {
            if (v != null) {
                this.specialTokens.put(k, v);
            }
        });
    }

    private static Map<String, String> tokens(String bos, String eos) {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("bos_token", bos);
        m.put("eos_token", eos);
        return m;
    }

    /** {@code chat_template.jinja} if present, else {@code tokenizer_config.json}'s {@code chat_template}. */
    public static ChatTemplate fromModelDir(Path dir) {
        Path jinja = dir.resolve("chat_template.jinja");
        Path config = dir.resolve("tokenizer_config.json");
        String source = null;
        Map<String, String> special = new LinkedHashMap<>();
        JsonNode cfg = null;
        if (Files.isRegularFile(config)) {
            try {
                cfg = new ObjectMapper().readTree(config.toFile());
            } catch (IOException e) {
                throw new ChatTemplateException(config + ": not valid JSON: " + e.getMessage());
            }
            for (String name : SPECIAL_TOKENS) {
                special.put(name, tokenText(cfg.get(name)));
            }
        }
        try {
            if (Files.isRegularFile(jinja)) {
                source = Files.readString(jinja);
            } else if (cfg != null && cfg.hasNonNull("chat_template")) {
                JsonNode t = cfg.get("chat_template");
                if (t.isTextual()) {
                    source = t.asText();
                } else if (t.isArray()) { // [{name, template}, ...]: the "default" one
                    for (JsonNode named : t) {
                        if ("default".equals(named.path("name").asText())) {
                            source = named.path("template").asText();
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new ChatTemplateException(jinja + ": cannot read: " + e.getMessage());
        }
        if (source == null) {
            throw new ChatTemplateException(dir + ": no chat template (expected chat_template.jinja or a chat_template field in tokenizer_config.json)");
        }
        try {
            return new ChatTemplate(source, special);
        } catch (TemplateException e) {
            throw new ChatTemplateException(dir + ": the chat template does not parse: " + e.getMessage());
        }
    }

    private static String tokenText(JsonNode n) {
        if (n == null || n.isNull()) {
            return null;
        }
        return n.isTextual() ? n.asText() : n.path("content").asText(null);
    }

    /**
     * @param messages OpenAI-style messages (JSON-like values)
     * @param tools    tool definitions or null
     * @param kwargs   template variables (add_generation_prompt, enable_thinking, ...)
     * @throws ChatTemplateException with the template's own message (e.g. "System message must be at the beginning.")
     */
    public String render(List<?> messages, List<?> tools, Map<String, Object> kwargs) {
        Map<String, Object> vars = new LinkedHashMap<>(specialTokens);
        vars.put("tools", tools);
        vars.put("documents", null);
        vars.put("add_generation_prompt", false);
        vars.putAll(kwargs);
        vars.put("messages", messages);
        try {
            return template.render(vars);
        } catch (TemplateException e) {
            throw new ChatTemplateException(e.getMessage());
        }
    }

    public String source() {
        return source;
    }
}

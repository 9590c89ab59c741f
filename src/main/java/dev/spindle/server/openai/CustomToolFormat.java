package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.grammar.LarkGrammar;
import dev.spindle.server.pipeline.ApiException;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * A custom (free-form) tool's {@code format}: free text ({@code {"type": "text"}} or absent), or a
 * grammar ({@code {"type": "grammar", "syntax": "lark" | "regex", "definition": ...}}). The model sees
 * the tool as a function of one string parameter {@code input}; a grammar becomes that parameter's
 * {@code pattern} (a Lark grammar through {@link LarkGrammar}), which constrained decoding enforces
 * on the text the model writes. A grammar this server cannot compile is a 400 naming what it lacks.
 *
 * @param pattern the regex the input must match whole, or null for free text
 */
record CustomToolFormat(String pattern) {
    static CustomToolFormat parse(JsonNode format, String path) {
        if (format == null || format.isNull()) {
            return new CustomToolFormat(null);
        }
        if (!format.isObject()) {
            throw ApiException.badRequest(path + " must be an object {\"type\": \"text\"} or {\"type\": \"grammar\", ...}, got " + format, path);
        }
        String type = format.path("type").asText("");
        switch (type) {
            case "text" -> {
                return new CustomToolFormat(null);
            }
            case "grammar" -> {
                String syntax = format.path("syntax").asText("");
                JsonNode def = format.get("definition");
                if (def == null || !def.isTextual() || def.asText().isBlank()) {
                    throw ApiException.badRequest(path + ".definition must be the grammar's text", path + ".definition");
                }
                return switch (syntax) {
                    case "regex" -> new CustomToolFormat(def.asText());
                    case "lark" -> {
                        try {
                            yield new CustomToolFormat(LarkGrammar.toRegex(def.asText()));
                        } catch (IllegalArgumentException e) {
                            throw ApiException.badRequest(path + ".definition: " + e.getMessage(), path + ".definition");
                        }
                    }
                    default -> throw ApiException.badRequest(path + ".syntax must be 'lark' or 'regex'; got " + format.get("syntax"), path + ".syntax");
                };
            }
            default -> throw ApiException.badRequest(path + ".type must be 'text' or 'grammar'; got " + format.get("type"), path + ".type");
        }
    }

    /** The function parameters the model sees: one string, {@code input}, matching the grammar where there is one. */
    ObjectNode parameters() {
        ObjectNode s = JSON.createObjectNode().put("type", "object");
        ObjectNode input = s.putObject("properties").putObject("input").put("type", "string")
                .put("description", pattern == null ? "The tool's input, as free text" : "The tool's input, in the tool's own syntax");
        if (pattern != null) {
            input.put("pattern", "^(" + pattern + ")$");
        }
        s.putArray("required").add("input");
        s.put("additionalProperties", false);
        return s;
    }
}

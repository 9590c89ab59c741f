package dev.spindle.server.anthropic;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.Fields;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.ToIntFunction;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * Anthropic's context editing ({@code context_management.edits}), applied to a Messages request
 * before it is rendered; the client keeps its full history, and the response reports what was cleared
 * ({@code context_management.applied_edits}). Edits run in the order given.
 * <ul>
 * <li>{@code clear_thinking_20251015}: the thinking blocks of all but the last {@code keep.value}
 * assistant turns that have any ({@code keep: "all"} keeps every one; default 1).</li>
 * <li>{@code clear_tool_uses_20250919}: once the prompt reaches {@code trigger} (input tokens,
 * default 100,000, or a count of tool uses), the results of every tool use but the last
 * {@code keep.value} (default 3) are replaced by a placeholder, oldest first, except those of
 * {@code exclude_tools}; with {@code clear_tool_inputs} (true, or a list of tool names) their inputs
 * too. With {@code clear_at_least}, an edit that would clear fewer input tokens is not applied.</li>
 * </ul>
 * Without an edit nothing is cleared: the model's template renders every turn's thinking it is given.
 * Token counts are the served model's, measured on the rendered prompt.
 */
final class ContextEdits {
    static final String THINKING = "clear_thinking_20251015";
    static final String TOOL_USES = "clear_tool_uses_20250919";
    /** What a cleared tool result (or input) reads as. */
    static final String CLEARED = "[this tool result was cleared to save context]";

    /** One edit as configured. */
    sealed interface Edit permits ClearThinking, ClearToolUses {
    }

    /** @param keep thinking turns kept, the latest; -1: all */
    record ClearThinking(int keep) implements Edit {
    }

    /**
     * @param triggerTokens   input tokens from which the edit applies (-1: by tool uses)
     * @param triggerUses     tool uses from which it applies (-1: by tokens)
     * @param keep            tool uses kept, the latest
     * @param clearAtLeast    input tokens the edit must clear, or it is not applied (0: any)
     * @param exclude         tools whose uses are never cleared
     * @param clearInputs     whether the inputs of cleared uses are cleared too
     * @param clearInputsOf   or only those of these tools (null: as clearInputs says)
     */
    record ClearToolUses(int triggerTokens, int triggerUses, int keep, int clearAtLeast, Set<String> exclude,
                         boolean clearInputs, Set<String> clearInputsOf) implements Edit {
    }

    /** The edited request and the report of what was applied. */
    record Result(JsonNode body, ArrayNode applied, int originalTokens) {
    }

    private final List<Edit> edits;

    private ContextEdits(List<Edit> edits) {
        this.edits = edits;
    }

    boolean isEmpty() {
        return edits.isEmpty();
    }

    /** Reads and checks {@code context_management} (absent: no edits). */
    static ContextEdits parse(JsonNode cm) {
        if (cm == null || cm.isNull()) {
            return new ContextEdits(List.of());
        }
        if (!cm.isObject()) {
            throw ApiException.badRequest("context_management must be an object {\"edits\": [...]}", "context_management");
        }
        JsonNode given = cm.get("edits");
        if (given != null && !given.isNull() && !given.isArray()) {
            throw ApiException.badRequest("context_management.edits: a list of edits was expected, got " + given, "context_management.edits");
        }
        List<Edit> edits = new ArrayList<>();
        for (int i = 0; given != null && i < given.size(); i++) {
            JsonNode e = given.get(i);
            String p = "context_management.edits." + i;
            if (!e.isObject()) {
                throw ApiException.badRequest(p + ": an edit object was expected, got " + e, p);
            }
            String type = e.path("type").asText("");
            edits.add(switch (type) {
                case THINKING -> thinking(e, p);
                case TOOL_USES -> toolUses(e, p);
                default -> throw ApiException.badRequest(p + ".type: '" + TOOL_USES + "' or '" + THINKING + "' was expected, got '" + type + "'", p + ".type");
            });
        }
        return new ContextEdits(List.copyOf(edits));
    }

    private static ClearThinking thinking(JsonNode e, String p) {
        JsonNode keep = e.get("keep");
        if (keep == null || keep.isNull()) {
            return new ClearThinking(1);
        }
        if (keep.isTextual() && keep.asText().equals("all")) {
            return new ClearThinking(-1);
        }
        if (!keep.isObject() || !"thinking_turns".equals(keep.path("type").asText())) {
            throw ApiException.badRequest(p + ".keep: \"all\" or {\"type\": \"thinking_turns\", \"value\": N} was expected, got " + keep, p + ".keep");
        }
        return new ClearThinking((int) Fields.integerValue(keep.get("value"), p + ".keep.value", 1, 0, Integer.MAX_VALUE));
    }

    private static ClearToolUses toolUses(JsonNode e, String p) {
        int triggerTokens = 100_000;
        int triggerUses = -1;
        JsonNode trigger = objectAt(e, "trigger", p);
        if (trigger != null) {
            String type = trigger.path("type").asText("");
            int value = (int) Fields.integerValue(trigger.get("value"), p + ".trigger.value", 0, 1, Integer.MAX_VALUE);
            switch (type) {
                case "input_tokens" -> triggerTokens = value;
                case "tool_uses" -> {
                    triggerTokens = -1;
                    triggerUses = value;
                }
                default -> throw ApiException.badRequest(p + ".trigger.type: 'input_tokens' or 'tool_uses' was expected, got '" + type + "'", p + ".trigger.type");
            }
        }
        int keep = 3;
        JsonNode k = objectAt(e, "keep", p);
        if (k != null) {
            if (!"tool_uses".equals(k.path("type").asText())) {
                throw ApiException.badRequest(p + ".keep.type: 'tool_uses' was expected, got " + k.get("type"), p + ".keep.type");
            }
            keep = (int) Fields.integerValue(k.get("value"), p + ".keep.value", 3, 0, Integer.MAX_VALUE);
        }
        int atLeast = 0;
        JsonNode c = objectAt(e, "clear_at_least", p);
        if (c != null) {
            if (!"input_tokens".equals(c.path("type").asText())) {
                throw ApiException.badRequest(p + ".clear_at_least.type: 'input_tokens' was expected, got " + c.get("type"), p + ".clear_at_least.type");
            }
            atLeast = (int) Fields.integerValue(c.get("value"), p + ".clear_at_least.value", 0, 0, Integer.MAX_VALUE);
        }
        JsonNode excluded = e.get("exclude_tools");
        if (excluded != null && !excluded.isNull() && !excluded.isArray()) {
            throw ApiException.badRequest(p + ".exclude_tools: a list of tool names was expected, got " + excluded, p + ".exclude_tools");
        }
        Set<String> exclude = names(excluded, p + ".exclude_tools");
        JsonNode inputs = e.get("clear_tool_inputs");
        boolean clearInputs = false;
        Set<String> inputsOf = null;
        if (inputs != null && !inputs.isNull()) {
            if (inputs.isBoolean()) {
                clearInputs = inputs.asBoolean();
            } else if (inputs.isArray()) {
                inputsOf = names(inputs, p + ".clear_tool_inputs");
            } else {
                throw ApiException.badRequest(p + ".clear_tool_inputs: a boolean or a list of tool names was expected, got " + inputs, p + ".clear_tool_inputs");
            }
        }
        return new ClearToolUses(triggerTokens, triggerUses, keep, atLeast, exclude, clearInputs, inputsOf);
    }

    private static JsonNode objectAt(JsonNode e, String field, String p) {
        JsonNode v = e.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (!v.isObject()) {
            throw ApiException.badRequest(p + "." + field + ": an object was expected, got " + v, p + "." + field);
        }
        return v;
    }

    private static Set<String> names(JsonNode list, String path) {
        Set<String> out = new HashSet<>();
        for (int i = 0; list != null && i < list.size(); i++) {
            if (!list.get(i).isTextual()) {
                throw ApiException.badRequest(path + "." + i + ": a tool name was expected, got " + list.get(i), path + "." + i);
            }
            out.add(list.get(i).asText());
        }
        return Set.copyOf(out);
    }

    /**
     * Applies the edits to a Messages request body.
     *
     * @param tokens the prompt's tokens for a body, as it would be rendered
     */
    Result apply(JsonNode body, ToIntFunction<JsonNode> tokens) {
        ArrayNode applied = JSON.createArrayNode();
        int original = tokens.applyAsInt(body);
        JsonNode current = body;
        int now = original;
        for (Edit edit : edits) {
            ObjectNode edited = current.deepCopy();
            ArrayNode messages = edited.withArray("messages");
            ObjectNode report = switch (edit) {
                case ClearThinking t -> clearThinking(messages, t);
                case ClearToolUses u -> clearToolUses(messages, u, now);
            };
            if (report == null) {
                continue;
            }
            int after = tokens.applyAsInt(edited);
            if (edit instanceof ClearToolUses u && now - after < u.clearAtLeast()) {
                continue; // would clear less than asked for: left as it was
            }
            report.put("cleared_input_tokens", Math.max(0, now - after));
            applied.add(report);
            current = edited;
            now = after;
        }
        return new Result(current, applied, original);
    }

    /** Removes the thinking blocks of the older thinking turns; null when none is cleared. */
    private static ObjectNode clearThinking(ArrayNode messages, ClearThinking t) {
        if (t.keep() < 0) {
            return null;
        }
        List<ArrayNode> turns = new ArrayList<>();
        for (JsonNode m : messages) {
            if ("assistant".equals(m.path("role").asText()) && m.path("content").isArray() && hasThinking(m.get("content"))) {
                turns.add((ArrayNode) m.get("content"));
            }
        }
        int clear = Math.max(0, turns.size() - t.keep());
        for (int i = 0; i < clear; i++) {
            ArrayNode content = turns.get(i);
            for (int k = content.size() - 1; k >= 0; k--) {
                String type = content.get(k).path("type").asText();
                if (type.equals("thinking") || type.equals("redacted_thinking")) {
                    content.remove(k);
                }
            }
        }
        return clear == 0 ? null : JSON.createObjectNode().put("type", THINKING).put("cleared_thinking_turns", clear);
    }

    private static boolean hasThinking(JsonNode content) {
        for (JsonNode b : content) {
            String type = b.path("type").asText();
            if (type.equals("thinking") || type.equals("redacted_thinking")) {
                return true;
            }
        }
        return false;
    }

    /** Clears the results (and inputs, where asked) of all but the latest tool uses, once triggered; null when nothing is cleared. */
    private static ObjectNode clearToolUses(ArrayNode messages, ClearToolUses u, int promptTokens) {
        List<ObjectNode> uses = new ArrayList<>();
        for (JsonNode m : messages) {
            if ("assistant".equals(m.path("role").asText()) && m.path("content").isArray()) {
                for (JsonNode b : m.get("content")) {
                    if ("tool_use".equals(b.path("type").asText())) {
                        uses.add((ObjectNode) b);
                    }
                }
            }
        }
        boolean triggered = u.triggerTokens() >= 0 ? promptTokens >= u.triggerTokens() : uses.size() >= u.triggerUses();
        if (!triggered) {
            return null;
        }
        Set<String> cleared = new HashSet<>();
        for (int i = 0; i < uses.size() - u.keep(); i++) {
            ObjectNode use = uses.get(i);
            String name = use.path("name").asText();
            if (u.exclude().contains(name)) {
                continue;
            }
            cleared.add(use.path("id").asText());
            if (u.clearInputsOf() != null ? u.clearInputsOf().contains(name) : u.clearInputs()) {
                use.putObject("input");
            }
        }
        if (cleared.isEmpty()) {
            return null;
        }
        for (JsonNode m : messages) {
            if ("user".equals(m.path("role").asText()) && m.path("content").isArray()) {
                for (JsonNode b : m.get("content")) {
                    if ("tool_result".equals(b.path("type").asText()) && cleared.contains(b.path("tool_use_id").asText())) {
                        ((ObjectNode) b).put("content", CLEARED);
                    }
                }
            }
        }
        return JSON.createObjectNode().put("type", TOOL_USES).put("cleared_tool_uses", cleared.size());
    }
}

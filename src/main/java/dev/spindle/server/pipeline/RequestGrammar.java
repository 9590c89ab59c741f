package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.grammar.Schema;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * What a chat request asks constrained decoding for, read from its fields: {@code tool_choice},
 * the tools' parameter schemas (strictly compiled where a call is forced or a tool is {@code strict}),
 * and the reply's format ({@code response_format}, vLLM's {@code structured_outputs} and
 * {@code guided_json}). A schema keyword the grammar cannot enforce is a 400 naming it where the
 * client asked for strictness.
 */
public final class RequestGrammar {
    private RequestGrammar() {
    }

    /** "auto", "none", "required", or "function:NAME" for a named function. */
    static String toolChoice(JsonNode choice) {
        if (choice == null || choice.isNull()) {
            return "auto";
        }
        if (choice.isTextual()) {
            String c = choice.asText();
            if (!List.of("auto", "none", "required").contains(c)) {
                throw ApiException.badRequest("tool_choice must be 'auto', 'none', 'required' or name a function, not '" + c + "'", "tool_choice");
            }
            return c;
        }
        String name = choice.isObject() ? choice.path("function").path("name").asText("") : "";
        if (name.isEmpty() || (choice.has("type") && !"function".equals(choice.path("type").asText()))) {
            throw ApiException.badRequest("tool_choice must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
        }
        return "function:" + name;
    }

    /**
     * Tools marked {@code strict: true}: their parameter schemas must compile strictly, so a keyword
     * constrained decoding cannot enforce is a 400 naming it rather than left unchecked.
     */
    static void strictTools(List<?> tools) {
        if (tools == null) {
            return;
        }
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = JSON.valueToTree(tools.get(i));
            JsonNode fn = t.has("function") ? t.get("function") : t;
            if (fn.path("strict").asBoolean(false) && fn.hasNonNull("parameters")) {
                try {
                    Schema.compile(fn.get("parameters"));
                } catch (IllegalArgumentException e) {
                    throw ApiException.badRequest("tool '" + fn.path("name").asText() + "' is strict, and its parameters " + e.getMessage(),
                            "tools[" + i + "]." + (t.has("function") ? "function." : "") + "parameters");
                }
            }
        }
    }

    /**
     * The functions a forced call may use (all of them for "required", the named one otherwise), their
     * parameter schemas compiled strictly: a keyword constrained decoding cannot enforce is a 400 naming it.
     */
    static Map<String, Schema> strictFunctions(List<?> tools, String choice) {
        String only = choice.startsWith("function:") ? choice.substring("function:".length()) : null;
        Map<String, Schema> functions = new LinkedHashMap<>();
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = JSON.valueToTree(tools.get(i));
            JsonNode fn = t.has("function") ? t.get("function") : t;
            String name = fn.path("name").asText();
            if (only != null && !only.equals(name)) {
                continue;
            }
            try {
                functions.put(name, fn.hasNonNull("parameters") ? Schema.compile(fn.get("parameters")) : Schema.anyObject());
            } catch (IllegalArgumentException e) {
                throw ApiException.badRequest("tool '" + name + "' parameters: " + e.getMessage(), "tools[" + i + "]." + (t.has("function") ? "function." : "") + "parameters");
            }
        }
        if (functions.isEmpty()) {
            throw ApiException.badRequest("tool_choice names '" + only + "', which is not among the tools", "tool_choice");
        }
        return functions;
    }

    /**
     * response_format: text (null), json_object (any object) or json_schema (compiled;
     * an unsupported keyword is a 400 naming it). The reply after the reasoning is then
     * constrained token by token.
     */
    static Schema responseSchema(JsonNode body) {
        JsonNode rf = Fields.get(body, "response_format");
        JsonNode alias = structuredOutputs(body);
        if (alias != null && rf != null) {
            throw ApiException.badRequest("give response_format or structured_outputs/guided_json, not both", "response_format");
        }
        return responseFormat(alias != null ? alias : rf);
    }

    /**
     * vLLM's structured_outputs ({@code json} or {@code json_object}) and guided_json (a schema), as the
     * response_format they mean; their other kinds (regex, choice, grammar, structural tags) are refused.
     */
    private static JsonNode structuredOutputs(JsonNode body) {
        JsonNode so = Fields.object(body, "structured_outputs");
        JsonNode gj = Fields.get(body, "guided_json");
        if (so != null && gj != null) {
            throw ApiException.badRequest("give structured_outputs or guided_json, not both", "guided_json");
        }
        if (gj != null) {
            JsonNode schema = gj;
            if (gj.isTextual()) {
                try {
                    schema = JSON.readTree(gj.asText());
                } catch (Exception e) {
                    throw ApiException.badRequest("guided_json must be a JSON schema (an object or a string holding one): " + e.getMessage(), "guided_json");
                }
            }
            if (schema == null || !schema.isObject()) {
                throw ApiException.badRequest("guided_json must be a JSON schema object, got " + gj, "guided_json");
            }
            ObjectNode rf = JSON.createObjectNode().put("type", "json_schema");
            rf.putObject("json_schema").put("name", "guided_json").set("schema", schema);
            return rf;
        }
        if (so == null) {
            return null;
        }
        for (var it = so.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!f.equals("json") && !f.equals("json_object") && !so.get(f).isNull() && !(so.get(f).isBoolean() && !so.get(f).asBoolean())) {
                throw ApiException.badRequest("structured_outputs." + f + " is not supported by this server (json and json_object are)", "structured_outputs." + f);
            }
        }
        JsonNode json = Fields.get(so, "json");
        if (json != null) {
            JsonNode schema = json;
            if (json.isTextual()) {
                try {
                    schema = JSON.readTree(json.asText());
                } catch (Exception e) {
                    throw ApiException.badRequest("structured_outputs.json must be a JSON schema: " + e.getMessage(), "structured_outputs.json");
                }
            }
            if (schema == null || !schema.isObject()) {
                throw ApiException.badRequest("structured_outputs.json must be a JSON schema object, got " + json, "structured_outputs.json");
            }
            ObjectNode rf = JSON.createObjectNode().put("type", "json_schema");
            rf.putObject("json_schema").put("name", "structured_outputs").set("schema", schema);
            return rf;
        }
        if (Fields.bool(so, "json_object", false)) {
            return JSON.createObjectNode().put("type", "json_object");
        }
        return null;
    }

    /** response_format as OpenAI gives it. */
    static Schema responseFormat(JsonNode rf) {
        if (rf == null || rf.isNull()) {
            return null;
        }
        if (!rf.isObject() || (rf.has("type") && !rf.get("type").isTextual())) {
            throw ApiException.badRequest("response_format must be an object with a type (text, json_object or json_schema), got " + rf, "response_format");
        }
        String type = rf.path("type").asText("text");
        return switch (type) {
            case "text" -> null;
            case "json_object" -> Schema.anyObject();
            case "json_schema" -> {
                JsonNode js = rf.path("json_schema");
                if (!js.path("schema").isObject()) {
                    throw ApiException.badRequest("response_format.json_schema.schema is required and must be a JSON schema object", "response_format");
                }
                try {
                    yield Schema.compile(js.get("schema"));
                } catch (IllegalArgumentException e) {
                    throw ApiException.badRequest(e.getMessage(), "response_format");
                }
            }
            default -> throw ApiException.badRequest("response_format type must be text, json_object or json_schema, not '" + type + "'", "response_format");
        };
    }
}

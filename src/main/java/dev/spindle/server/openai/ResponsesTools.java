package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.pipeline.ApiException;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * The tools of a Responses request as the chat pipeline offers them, and where each of the model's
 * calls goes back to. The model sees function tools only; this maps the Responses API's kinds onto them:
 * <ul>
 * <li>{@code function}: as it is.</li>
 * <li>{@code namespace} (Codex groups MCP servers' tools so): each tool inside offered under its flat name
 * ({@link #flatName}); a call comes back as a {@code function_call} with the inner {@code name} and the
 * {@code namespace}.</li>
 * <li>{@code custom} (free-form input, Codex's {@code apply_patch}): a function of one string parameter
 * {@code input}, which the model writes as raw text; a call comes back as a {@code custom_tool_call}
 * carrying that text. Its {@code format} ({@code grammar} in Lark or regex syntax) is enforced by
 * constrained decoding where {@link CustomToolFormat} compiles it.</li>
 * <li>{@code local_shell}: a function of {@code command} (argv), {@code workdir} and {@code timeout_ms}; a
 * call comes back as a {@code local_shell_call} with an {@code exec} action.</li>
 * <li>Tools that need OpenAI's own servers (web search, file search, image generation, computer use,
 * code interpreter, MCP, the hosted shell and apply_patch): left out of the prompt with a warning.</li>
 * </ul>
 *
 * @param chatTools the chat-completions tools offered to the model
 * @param origins   each offered function's flat name → what the client called it
 */
record ResponsesTools(ArrayNode chatTools, Map<String, Origin> origins) {
    /** Tool types served by OpenAI's own infrastructure: left out with a warning, not an error. */
    static final Set<String> HOSTED = Set.of("web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
            "file_search", "image_generation", "computer_use_preview", "computer_use", "code_interpreter", "mcp", "shell", "apply_patch");

    /** What kind of tool a call is for, and its name as the client knows it. */
    enum Kind { FUNCTION, CUSTOM, LOCAL_SHELL }

    /** @param namespace the namespace the tool was offered in, or null */
    record Origin(Kind kind, String namespace, String name) {
    }

    static final ResponsesTools NONE = new ResponsesTools(JSON.createArrayNode(), Map.of());

    /** The name the model sees for a namespaced tool: the namespace and the name, joined by "__" unless the namespace ends with "_". */
    static String flatName(String namespace, String name) {
        if (namespace == null || namespace.isEmpty()) {
            return name;
        }
        return namespace.endsWith("_") ? namespace + name : namespace + "__" + name;
    }

    /** Where a call of the flat name {@code name} goes back to (a plain function when the name is unknown). */
    Origin origin(String name) {
        Origin o = origins.get(name);
        return o != null ? o : new Origin(Kind.FUNCTION, null, name);
    }

    static ResponsesTools parse(JsonNode tools, List<String> warnings) {
        if (tools == null || tools.isNull()) {
            return NONE;
        }
        if (!tools.isArray()) {
            throw ApiException.badRequest("tools must be a list of tools, got " + tools.getNodeType(), "tools");
        }
        ArrayNode out = JSON.createArrayNode();
        Map<String, Origin> origins = new LinkedHashMap<>();
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = tools.get(i);
            String p = "tools[" + i + "]";
            if (!t.isObject()) {
                throw ApiException.badRequest(p + " must be a tool object, got " + t, p);
            }
            String type = t.path("type").asText("");
            if (HOSTED.contains(type)) {
                warnings.add(p + ": the '" + type + "' tool needs OpenAI's own servers; it was left out of the prompt");
                continue;
            }
            switch (type) {
                case "function", "custom" -> add(t, p, null, null, out, origins);
                case "local_shell" -> {
                    ObjectNode fn = out.addObject().put("type", "function").putObject("function").put("name", "local_shell")
                            .put("description", "Runs a command on the user's machine and returns its output.");
                    fn.set("parameters", localShellParameters());
                    origins.put("local_shell", new Origin(Kind.LOCAL_SHELL, null, "local_shell"));
                }
                case "namespace" -> {
                    String ns = name(t, p);
                    String nsDescription = t.path("description").asText("");
                    JsonNode inner = t.get("tools");
                    if (inner == null || !inner.isArray()) {
                        throw ApiException.badRequest(p + ".tools must be the list of the namespace's tools", p + ".tools");
                    }
                    for (int k = 0; k < inner.size(); k++) {
                        String ip = p + ".tools[" + k + "]";
                        String it = inner.get(k).path("type").asText("");
                        if (!it.equals("function") && !it.equals("custom")) {
                            throw ApiException.badRequest(ip + ".type must be 'function' or 'custom' inside a namespace; got " + inner.get(k).get("type"), ip + ".type");
                        }
                        add(inner.get(k), ip, ns, nsDescription, out, origins);
                    }
                }
                default -> throw ApiException.badRequest(p + ".type must be function, custom, namespace or local_shell (or a hosted tool, "
                        + "which is left out); got " + t.get("type"), p + ".type");
            }
        }
        return new ResponsesTools(out, Map.copyOf(origins));
    }

    private static String name(JsonNode t, String p) {
        if (!t.path("name").isTextual() || t.get("name").asText().isEmpty()) {
            throw ApiException.badRequest(p + ".name must be a non-empty string", p + ".name");
        }
        return t.get("name").asText();
    }

    /** A function or custom tool, in a namespace or not, as the chat tool the model sees. */
    private static void add(JsonNode t, String p, String ns, String nsDescription, ArrayNode out, Map<String, Origin> origins) {
        String name = name(t, p);
        String flat = flatName(ns, name);
        boolean custom = t.path("type").asText().equals("custom");
        if (origins.containsKey(flat)) {
            throw ApiException.badRequest(p + ": the tool name '" + flat + "' is offered twice", p + ".name");
        }
        ObjectNode fn = out.addObject().put("type", "function").putObject("function").put("name", flat);
        String description = t.path("description").isTextual() ? t.get("description").asText() : "";
        if (nsDescription != null && !nsDescription.isEmpty()) {
            description = description.isEmpty() ? nsDescription : nsDescription + "\n" + description;
        }
        if (!description.isEmpty()) {
            fn.put("description", description);
        }
        if (custom) {
            fn.set("parameters", CustomToolFormat.parse(t.get("format"), p + ".format").parameters());
        } else {
            if (t.path("strict").isBoolean()) {
                fn.put("strict", t.get("strict").asBoolean());
            }
            JsonNode params = t.get("parameters");
            if (params != null && !params.isNull()) {
                if (!params.isObject()) {
                    throw ApiException.badRequest(p + ".parameters must be a JSON schema object, got " + params, p + ".parameters");
                }
                fn.set("parameters", params);
            }
        }
        origins.put(flat, new Origin(custom ? Kind.CUSTOM : Kind.FUNCTION, ns, name));
    }

    private static ObjectNode localShellParameters() {
        ObjectNode s = JSON.createObjectNode().put("type", "object");
        ObjectNode props = s.putObject("properties");
        props.putObject("command").put("type", "array").put("description", "The command and its arguments").putObject("items").put("type", "string");
        props.putObject("workdir").put("type", "string").put("description", "The directory to run it in");
        props.putObject("timeout_ms").put("type", "integer").put("description", "How long it may run, in milliseconds");
        s.putArray("required").add("command");
        return s;
    }

    /**
     * The tools as the response echoes them: the function tools offered at the top level, each with its
     * {@code description}, {@code parameters} and {@code strict} present (the Open Responses specification's
     * tools list holds function tools only; other kinds are not echoed).
     */
    static ArrayNode echoed(JsonNode tools) {
        ArrayNode out = JSON.createArrayNode();
        if (tools == null || !tools.isArray()) {
            return out;
        }
        for (JsonNode t : tools) {
            if (!"function".equals(t.path("type").asText())) {
                continue;
            }
            ObjectNode copy = ((ObjectNode) t).deepCopy();
            if (!copy.has("strict")) {
                copy.put("strict", false); // absent: schemas are enforced leniently (unsupported keywords unchecked), not refused
            }
            if (!copy.has("description")) {
                copy.putNull("description");
            }
            if (!copy.has("parameters")) {
                copy.putNull("parameters");
            }
            out.add(copy);
        }
        return out;
    }
}

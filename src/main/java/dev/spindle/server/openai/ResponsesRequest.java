package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.Fields;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Set;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * A Responses API request ({@code POST /v1/responses}) translated into the chat-completions body
 * the one pipeline reads: {@code instructions} and {@code input} items become chat messages
 * (function calls an assistant turn's {@code tool_calls}, their outputs tool messages, reasoning
 * items the next assistant turn's {@code reasoning_content}), function tools become chat tools,
 * {@code text.format} becomes {@code response_format}, {@code reasoning.effort} none/minimal turns
 * the template's thinking off, {@code max_output_tokens} becomes {@code max_tokens}. Fields are
 * checked here under their own names. Tools that need OpenAI's own servers (web search, file
 * search, image generation, computer use, code interpreter, MCP, shell) are left out of the prompt
 * and listed in {@link #warnings}. Accepted without effect, and echoed: {@code service_tier},
 * {@code prompt_cache_key}, {@code prompt_cache_retention}, {@code safety_identifier}, {@code user},
 * {@code max_tool_calls} (it bounds calls of hosted tools, which never run here), {@code store}'s
 * absence of a limit, {@code stream_options}.
 *
 * @param chatBody    the chat-completions body to prepare
 * @param messages    the conversation as chat messages, without the instructions (what a follow-up continues)
 * @param warnings    what was left out, for the response's {@code warnings}
 * @param encryptedReasoning whether reasoning items carry {@code encrypted_content} (include: reasoning.encrypted_content)
 * @param tools       the tools offered, and where each call goes back to ({@link ResponsesTools})
 * @param echoedTools the tools as the response echoes them
 */
record ResponsesRequest(ObjectNode chatBody, ArrayNode messages, List<String> warnings, boolean encryptedReasoning, boolean store,
                        ResponsesTools tools, ArrayNode echoedTools) {
    /** Fields of the Responses API Spindle does not implement: refused when set. */
    private static final List<String> REFUSED = List.of("background", "conversation", "prompt", "top_logprobs");
    /** The prefix of Spindle's own encrypted_content (the reasoning text, base64: Spindle keeps no secrets, only the text). */
    static final String REASONING_BLOB = "spindle-reasoning:";

    /**
     * @param previous the stored conversation {@code previous_response_id} names (null: none)
     */
    static ResponsesRequest parse(JsonNode body, ArrayNode previous) {
        for (String f : REFUSED) {
            JsonNode v = body.get(f);
            if (v != null && !v.isNull() && !(v.isBoolean() && !v.asBoolean()) && !(f.equals("top_logprobs") && v.isNumber() && v.asInt() == 0)) {
                throw ApiException.badRequest(f + " is not supported by this server; leave it out", f);
            }
        }
        String truncation = Fields.string(body, "truncation", "disabled");
        if (!truncation.equals("disabled")) {
            throw ApiException.badRequest("truncation must be 'disabled' (the server does not drop input items to fit); got '" + truncation + "'", "truncation");
        }
        boolean encrypted = false;
        JsonNode include = Fields.array(body, "include");
        if (include != null) {
            for (int i = 0; i < include.size(); i++) {
                String inc = include.get(i).asText("");
                if (inc.equals("reasoning.encrypted_content")) {
                    encrypted = true;
                } else if (inc.equals("message.output_text.logprobs") || inc.equals("message.input_image.image_url")) {
                    throw ApiException.badRequest("include '" + inc + "' is not supported by this server", "include[" + i + "]");
                }
                // the other include values name outputs of hosted tools, which this server never produces
            }
        }
        ArrayNode messages = previous == null ? JSON.createArrayNode() : previous.deepCopy();
        JsonNode input = body.get("input");
        if (input == null || input.isNull()) {
            if (previous == null) {
                throw ApiException.badRequest("input is required: a string or a list of input items", "input");
            }
        } else if (input.isTextual()) {
            messages.addObject().put("role", "user").put("content", input.asText());
        } else if (input.isArray()) {
            items(input, messages);
        } else {
            throw ApiException.badRequest("input must be a string or a list of input items, got " + input.getNodeType(), "input");
        }
        if (messages.isEmpty()) {
            throw ApiException.badRequest("input must hold at least one item", "input");
        }
        ObjectNode chat = JSON.createObjectNode();
        ArrayNode all = chat.putArray("messages");
        String instructions = Fields.string(body, "instructions", null);
        if (instructions != null && !instructions.isEmpty()) {
            all.addObject().put("role", "system").put("content", instructions);
        }
        all.addAll(messages);
        List<String> warnings = new ArrayList<>();
        ResponsesTools tools = ResponsesTools.parse(body.get("tools"), warnings);
        if (!tools.chatTools().isEmpty()) {
            chat.set("tools", tools.chatTools());
        }
        JsonNode choice = toolChoice(body.get("tool_choice"));
        if (choice != null) {
            chat.set("tool_choice", choice);
        }
        copy(body, chat, "parallel_tool_calls");
        copy(body, chat, "temperature");
        copy(body, chat, "top_p");
        copy(body, chat, "presence_penalty");
        copy(body, chat, "frequency_penalty");
        Fields.integer(body, "max_tool_calls", 0, 0, Integer.MAX_VALUE);
        for (String f : List.of("service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "user")) {
            Fields.string(body, f, null);
        }
        Fields.object(body, "stream_options");
        JsonNode max = Fields.get(body, "max_output_tokens");
        if (max != null) {
            chat.put("max_tokens", Fields.integer(body, "max_output_tokens", 0, 1, Integer.MAX_VALUE));
        }
        JsonNode text = Fields.object(body, "text");
        if (text != null) {
            JsonNode format = Fields.object(text, "format");
            if (format != null) {
                chat.set("response_format", responseFormat(format));
            }
        }
        JsonNode reasoning = Fields.object(body, "reasoning");
        if (reasoning != null) {
            String effort = Fields.string(reasoning, "effort", "medium");
            if (!Set.of("none", "minimal", "low", "medium", "high", "xhigh").contains(effort)) {
                throw ApiException.badRequest("reasoning.effort must be none, minimal, low, medium, high or xhigh; got '" + effort + "'", "reasoning.effort");
            }
            if (effort.equals("none") || effort.equals("minimal")) {
                chat.putObject("chat_template_kwargs").put("enable_thinking", false);
            }
        }
        Fields.object(body, "metadata");
        boolean store = Fields.bool(body, "store", true);
        Fields.bool(body, "stream", false);
        return new ResponsesRequest(chat, messages, warnings, encrypted, store, tools, ResponsesTools.echoed(body.get("tools")));
    }

    private static void copy(JsonNode from, ObjectNode to, String field) {
        JsonNode v = Fields.get(from, field);
        if (v != null) {
            to.set(field, v);
        }
    }

    /** Input items, appended to {@code out} as chat messages. */
    static void items(JsonNode input, ArrayNode out) {
        String reasoning = null; // a reasoning item waits for the assistant turn it belongs to
        for (int i = 0; i < input.size(); i++) {
            JsonNode item = input.get(i);
            String path = "input[" + i + "]";
            if (!item.isObject()) {
                throw ApiException.badRequest(path + " must be an input item object, got " + item, path);
            }
            String type = item.hasNonNull("type") ? item.path("type").asText("") : item.has("role") ? "message" : "";
            switch (type) {
                case "message" -> {
                    String role = item.path("role").asText("");
                    if (!Set.of("user", "assistant", "system", "developer").contains(role)) {
                        throw ApiException.badRequest(path + ".role must be user, assistant, system or developer; got " + item.get("role"), path + ".role");
                    }
                    ObjectNode m = out.addObject().put("role", role).put("content", contentText(item.get("content"), path + ".content"));
                    if (role.equals("assistant") && reasoning != null) {
                        m.put("reasoning_content", reasoning);
                        reasoning = null;
                    }
                }
                case "function_call", "custom_tool_call", "local_shell_call" -> {
                    String callId = required(item, "call_id", path);
                    String name = type.equals("local_shell_call") ? "local_shell" : required(item, "name", path);
                    String args = switch (type) {
                        case "function_call" -> {
                            JsonNode a = item.get("arguments");
                            if (a != null && !a.isNull() && !a.isTextual()) {
                                throw ApiException.badRequest(path + ".arguments must be a JSON string, got " + a, path + ".arguments");
                            }
                            yield a == null || a.isNull() ? "{}" : a.asText();
                        }
                        case "custom_tool_call" -> {
                            JsonNode in = item.get("input");
                            if (in == null || !in.isTextual()) {
                                throw ApiException.badRequest(path + ".input must be the call's text", path + ".input");
                            }
                            yield JSON.createObjectNode().put("input", in.asText()).toString();
                        }
                        default -> localShellArguments(item, path);
                    };
                    if (item.hasNonNull("namespace")) {
                        name = ResponsesTools.flatName(required(item, "namespace", path), name);
                    }
                    ObjectNode turn = assistantTurnFor(out);
                    if (reasoning != null) {
                        turn.put("reasoning_content", reasoning);
                        reasoning = null;
                    }
                    ArrayNode calls = turn.has("tool_calls") ? (ArrayNode) turn.get("tool_calls") : turn.putArray("tool_calls");
                    ObjectNode call = calls.addObject().put("id", callId).put("type", "function");
                    call.putObject("function").put("name", name).put("arguments", args);
                }
                case "compaction", "compaction_summary" -> out.addObject().put("role", "user").put("content", Compaction.render(item, path));
                case "function_call_output", "custom_tool_call_output", "local_shell_call_output" -> {
                    String callId = required(item, "call_id", path);
                    JsonNode output = item.get("output");
                    if (output == null || output.isNull()) {
                        throw ApiException.badRequest(path + ".output is required (a string or a list of input_text parts)", path + ".output");
                    }
                    out.addObject().put("role", "tool").put("tool_call_id", callId).put("content", contentText(output, path + ".output"));
                }
                case "reasoning" -> reasoning = reasoningText(item, path);
                case "item_reference" -> throw ApiException.badRequest(path + " is an item_reference; this server does not look up items by id "
                        + "(send the item itself, or continue with previous_response_id)", path + ".type");
                default -> throw ApiException.badRequest(path + ".type '" + type + "' is not an input item this server reads "
                        + "(message, function_call, function_call_output, custom_tool_call, custom_tool_call_output, local_shell_call, "
                        + "reasoning, compaction)", path + ".type");
            }
        }
    }

    /** A local_shell_call's exec action as the arguments of the local_shell function the model was offered. */
    private static String localShellArguments(JsonNode item, String path) {
        JsonNode action = item.get("action");
        if (action == null || !action.isObject() || !action.path("command").isArray()) {
            throw ApiException.badRequest(path + ".action must be an exec action with a command list", path + ".action");
        }
        ObjectNode a = JSON.createObjectNode();
        a.set("command", action.get("command"));
        if (action.hasNonNull("working_directory")) {
            a.set("workdir", action.get("working_directory"));
        }
        if (action.hasNonNull("timeout_ms")) {
            a.set("timeout_ms", action.get("timeout_ms"));
        }
        return a.toString();
    }

    /** The assistant turn function calls join: the last message when it is the assistant's, else a new one. */
    private static ObjectNode assistantTurnFor(ArrayNode out) {
        if (!out.isEmpty() && "assistant".equals(out.get(out.size() - 1).path("role").asText())) {
            return (ObjectNode) out.get(out.size() - 1);
        }
        return out.addObject().put("role", "assistant").put("content", "");
    }

    private static String required(JsonNode item, String field, String path) {
        JsonNode v = item.get(field);
        if (v == null || !v.isTextual() || v.asText().isEmpty()) {
            throw ApiException.badRequest(path + "." + field + " is required and must be a non-empty string", path + "." + field);
        }
        return v.asText();
    }

    /** A message's content (a string, or text parts) as one string; images, files and audio are refused. */
    static String contentText(JsonNode content, String path) {
        if (content == null || content.isNull()) {
            return "";
        }
        if (content.isTextual()) {
            return content.asText();
        }
        if (!content.isArray()) {
            throw ApiException.badRequest(path + " must be a string or a list of content parts, got " + content.getNodeType(), path);
        }
        StringBuilder b = new StringBuilder();
        for (int k = 0; k < content.size(); k++) {
            JsonNode part = content.get(k);
            String p = path + "[" + k + "]";
            String type = part.path("type").asText("");
            switch (type) {
                case "input_text", "output_text", "text", "summary_text", "reasoning_text" -> {
                    if (!part.path("text").isTextual()) {
                        throw ApiException.badRequest(p + ".text must be a string", p + ".text");
                    }
                    b.append(part.get("text").asText());
                }
                case "refusal" -> b.append(part.path("refusal").asText(""));
                case "input_image", "input_file", "input_audio", "image_url", "input_video" ->
                        throw ApiException.badRequest(p + " is an '" + type + "' part; this model is text-only, so only text parts are accepted", p + ".type");
                default -> throw ApiException.badRequest(p + ".type '" + type + "' is not a content part this server reads (input_text, output_text)", p + ".type");
            }
        }
        return b.toString();
    }

    /** A reasoning item's text: its reasoning_text content, else its summary, else Spindle's own encrypted_content. */
    private static String reasoningText(JsonNode item, String path) {
        String content = item.has("content") && !item.get("content").isNull() ? contentText(item.get("content"), path + ".content") : "";
        if (!content.isEmpty()) {
            return content;
        }
        String summary = item.has("summary") && !item.get("summary").isNull() ? contentText(item.get("summary"), path + ".summary") : "";
        if (!summary.isEmpty()) {
            return summary;
        }
        String blob = item.path("encrypted_content").asText("");
        if (blob.startsWith(REASONING_BLOB)) {
            try {
                return new String(Base64.getDecoder().decode(blob.substring(REASONING_BLOB.length())), StandardCharsets.UTF_8);
            } catch (IllegalArgumentException e) {
                throw ApiException.badRequest(path + ".encrypted_content is not one this server wrote", path + ".encrypted_content");
            }
        }
        return null; // another server's encrypted reasoning: nothing this model can read
    }

    private static JsonNode toolChoice(JsonNode c) {
        if (c == null || c.isNull()) {
            return null;
        }
        if (c.isTextual()) {
            return c;
        }
        if (c.isObject() && "function".equals(c.path("type").asText()) && c.path("name").isTextual()) {
            ObjectNode o = JSON.createObjectNode().put("type", "function");
            o.putObject("function").put("name", c.get("name").asText());
            return o;
        }
        if (c.isObject() && ResponsesTools.HOSTED.contains(c.path("type").asText())) {
            throw ApiException.badRequest("tool_choice names the hosted tool '" + c.path("type").asText() + "', which this server does not have", "tool_choice");
        }
        throw ApiException.badRequest("tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}; got " + c, "tool_choice");
    }

    private static ObjectNode responseFormat(JsonNode f) {
        String type = f.path("type").asText("");
        return switch (type) {
            case "text" -> JSON.createObjectNode().put("type", "text");
            case "json_object" -> JSON.createObjectNode().put("type", "json_object");
            case "json_schema" -> {
                if (!f.path("schema").isObject()) {
                    throw ApiException.badRequest("text.format.schema is required and must be a JSON schema object", "text.format.schema");
                }
                ObjectNode rf = JSON.createObjectNode().put("type", "json_schema");
                rf.putObject("json_schema").put("name", f.path("name").asText("response")).set("schema", f.get("schema"));
                yield rf;
            }
            default -> throw ApiException.badRequest("text.format.type must be text, json_object or json_schema; got " + f.get("type"), "text.format.type");
        };
    }
}

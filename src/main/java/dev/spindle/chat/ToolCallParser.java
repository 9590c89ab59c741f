package dev.spindle.chat;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.List;

import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Finds tool calls in the reply text, incrementally. Nanbeige writes
 * {@code <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>...</function>\n</tool_call>}
 * (several in a row), or with {@code tool_call_format=json}
 * {@code <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>}; both are read.
 * Text outside calls is content; a call is released whole once its closing tag arrives.
 * Parameter values are typed by the tool's schema: strings stay verbatim, anything else
 * is parsed as JSON (kept as text if it does not parse). A malformed call (unknown
 * function, bad structure, unclosed at the end) is given back as content, never dropped.
 */
public final class ToolCallParser {
    static final String OPEN = ChatFormat.CALL_OPEN;
    static final String CLOSE = ChatFormat.CALL_CLOSE;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern FUNCTION = Pattern.compile("\\A\\s*<function=([^>\\n]+)>\\n?(.*?)</function>\\s*\\z", Pattern.DOTALL);
    private static final Pattern PARAMETER = Pattern.compile("<parameter=([^>\\n]+)>\\n?(.*?)\\n?</parameter>\\s*", Pattern.DOTALL);

    private final ToolSchemas tools;
    private final Supplier<String> ids;
    private final StringBuilder pending = new StringBuilder();
    private final StringBuilder heldWhitespace = new StringBuilder();
    private boolean inCall;
    private int nextIndex;
    private boolean contentStarted;

    /** @param ids makes call ids ({@code call_...}) */
    public ToolCallParser(ToolSchemas tools, Supplier<String> ids) {
        this.tools = tools;
        this.ids = ids;
    }

    /** Consumes reply text; returns the content it releases and the calls it completes. */
    public ParsedDelta next(String delta) {
        pending.append(delta);
        StringBuilder content = new StringBuilder();
        List<ToolCall> calls = new ArrayList<>();
        while (true) {
            if (!inCall) {
                int open = pending.indexOf(OPEN);
                if (open >= 0) {
                    emitContent(content, pending.substring(0, open), true);
                    pending.delete(0, open + OPEN.length());
                    inCall = true;
                    continue;
                }
                int hold = TagScanner.partialSuffix(pending, OPEN);
                emitContent(content, pending.substring(0, pending.length() - hold), false);
                pending.delete(0, pending.length() - hold);
                break;
            }
            int close = pending.indexOf(CLOSE);
            if (close < 0) {
                break;
            }
            String body = pending.substring(0, close);
            pending.delete(0, close + CLOSE.length());
            inCall = false;
            ToolCall call = parse(body);
            if (call != null) {
                calls.add(call);
            } else {
                emitContent(content, OPEN + body + CLOSE, false);
            }
        }
        return new ParsedDelta("", content.toString(), calls);
    }

    /** End of the stream: an unclosed call and held-back text come back as content. */
    public ParsedDelta finish() {
        StringBuilder content = new StringBuilder();
        String rest = (inCall ? OPEN : "") + pending;
        pending.setLength(0);
        inCall = false;
        if (!rest.isEmpty()) {
            emitContent(content, rest, false);
        }
        return new ParsedDelta("", content.toString(), List.of());
    }

    /**
     * Content up to a call loses the whitespace that separates it from the call
     * ({@code "Sure.\n\n<tool_call>"} gives "Sure."); whitespace is held back until
     * it is known whether a call follows.
     */
    private void emitContent(StringBuilder out, String text, boolean beforeCall) {
        if (text.isEmpty()) {
            if (beforeCall) {
                heldWhitespace.setLength(0);
            }
            return;
        }
        int end = text.length();
        while (end > 0 && Character.isWhitespace(text.charAt(end - 1))) {
            end--;
        }
        if (end == 0) {
            if (beforeCall) {
                heldWhitespace.setLength(0);
            } else if (contentStarted) {
                heldWhitespace.append(text);
            }
            return;
        }
        String body = text.substring(0, end);
        if (!contentStarted) {
            body = body.stripLeading();
            contentStarted = !body.isEmpty();
        } else {
            out.append(heldWhitespace);
        }
        heldWhitespace.setLength(0);
        out.append(body);
        if (!beforeCall) {
            heldWhitespace.append(text, end, text.length());
        }
    }

    private ToolCall parse(String body) {
        String trimmed = body.strip();
        String name;
        ObjectNode args = JSON.createObjectNode();
        if (trimmed.startsWith("{")) {
            try {
                JsonNode obj = JSON.readTree(trimmed);
                if (obj == null || !obj.path("name").isTextual()) {
                    return null;
                }
                name = obj.get("name").asText();
                JsonNode a = obj.get("arguments");
                if (a != null && a.isTextual()) {
                    a = JSON.readTree(a.asText());
                }
                if (a != null && !a.isNull()) {
                    if (!a.isObject()) {
                        return null;
                    }
                    args = (ObjectNode) a;
                }
            } catch (JsonProcessingException e) {
                return null;
            }
        } else {
            Matcher f = FUNCTION.matcher(body);
            if (!f.matches()) {
                return null;
            }
            name = f.group(1).strip();
            String params = f.group(2);
            Matcher p = PARAMETER.matcher(params);
            int at = 0;
            while (p.find()) {
                if (!params.substring(at, p.start()).isBlank()) {
                    return null; // stray text between parameters
                }
                String key = p.group(1).strip();
                args.set(key, typed(name, key, p.group(2)));
                at = p.end();
            }
            if (!params.substring(at).isBlank()) {
                return null;
            }
        }
        if (!tools.has(name)) {
            return null;
        }
        return new ToolCall(nextIndex++, ids.get(), name, args.toString());
    }

    private JsonNode typed(String function, String key, String raw) {
        if (tools.isString(function, key)) {
            return JSON.getNodeFactory().textNode(raw);
        }
        try {
            JsonNode v = JSON.readTree(raw);
            return v == null || v.isMissingNode() ? JSON.getNodeFactory().textNode(raw) : v;
        } catch (JsonProcessingException e) {
            return JSON.getNodeFactory().textNode(raw);
        }
    }

    /** A whole reply at once (non-streaming). */
    public static ParsedDelta parseAll(String text, ToolSchemas tools, Supplier<String> ids) {
        ToolCallParser p = new ToolCallParser(tools, ids);
        ParsedDelta a = p.next(text);
        ParsedDelta b = p.finish();
        List<ToolCall> calls = new ArrayList<>(a.toolCalls());
        calls.addAll(b.toolCalls());
        return new ParsedDelta("", a.content() + b.content(), calls);
    }

}

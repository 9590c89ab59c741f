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
 * Text outside calls is content.
 *
 * <p>An XML call is streamed as it is written: once its function is named (and is one of the
 * tools) the call is announced ({@link ToolCallDelta} with id and name), each parameter adds an
 * argument fragment when its {@code </parameter>} arrives, and {@code </tool_call>} closes the
 * object and releases the whole {@link ToolCall}. A call broken by stray text before its closing
 * tag keeps the parameters it completed, and the stray text comes back as content. A call the end
 * of the stream cuts off (max_tokens) is never released as a call: its pieces are closed (the
 * streamed arguments still parse) and its whole text comes back as content, as an unclosed call
 * always did. A JSON-format call is released whole at its closing tag. Parameter values are typed by the tool's schema: strings stay
 * verbatim, anything else is parsed as JSON (kept as text if it does not parse). A call that
 * never names a known function (unknown function, bad structure, unclosed) is given back as
 * content, never dropped.
 */
public final class ToolCallParser {
    static final String OPEN = ChatFormat.CALL_OPEN;
    static final String CLOSE = ChatFormat.CALL_CLOSE;
    private static final String FUNCTION_OPEN = "<function=";
    private static final String FUNCTION_CLOSE = "</function>";
    private static final String PARAM_OPEN = "<parameter=";
    private static final String PARAM_CLOSE = "</parameter>";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern FUNCTION = Pattern.compile("\\A\\s*<function=([^>\\n]+)>\\n?(.*?)</function>\\s*\\z", Pattern.DOTALL);
    private static final Pattern PARAMETER = Pattern.compile("<parameter=([^>\\n]+)>\\n?(.*?)\\n?</parameter>\\s*", Pattern.DOTALL);

    /** Where the parser is: outside a call, at a call's head, in a streamed call's parameters, in a call read whole, or in the broken rest of a call. */
    private enum State { TEXT, HEAD, ARGS, WHOLE, BROKEN }

    private final ToolSchemas tools;
    private final Supplier<String> ids;
    private final StringBuilder pending = new StringBuilder();
    private final StringBuilder heldWhitespace = new StringBuilder();
    private State state = State.TEXT;
    private int nextIndex;
    private boolean contentStarted;
    // the call being streamed
    private String callId;
    private String callName;
    private final StringBuilder callArgs = new StringBuilder();
    private final StringBuilder callText = new StringBuilder(); // the call's text from <tool_call> on, for a call the stream cuts off

    /** @param ids makes call ids ({@code call_...}) */
    public ToolCallParser(ToolSchemas tools, Supplier<String> ids) {
        this.tools = tools;
        this.ids = ids;
    }

    /** Consumes reply text; returns the content it releases and the calls (and pieces of calls) it completes. */
    public ParsedDelta next(String delta) {
        pending.append(delta);
        Out out = new Out();
        advance(out, false);
        return out.delta();
    }

    /** End of the stream: a streamed call is closed with what it has, an unannounced call and held-back text come back as content. */
    public ParsedDelta finish() {
        Out out = new Out();
        advance(out, true);
        switch (state) {
            case ARGS, BROKEN -> {
                // cut off: the pieces are closed, the call is not released, and its text is content
                String text = OPEN + callText + pending;
                pending.setLength(0);
                out.pieces.add(new ToolCallDelta(nextIndex, null, null, callArgs.isEmpty() ? "{}" : "}"));
                nextIndex++;
                callArgs.setLength(0);
                callText.setLength(0);
                state = State.TEXT;
                emitContent(out.content, text, false);
            }
            case HEAD, WHOLE -> {
                String rest = OPEN + pending;
                pending.setLength(0);
                state = State.TEXT;
                emitContent(out.content, rest, false);
            }
            case TEXT -> {
                String rest = pending.toString();
                pending.setLength(0);
                emitContent(out.content, rest, false);
            }
        }
        return out.delta();
    }

    private final class Out {
        final StringBuilder content = new StringBuilder();
        final List<ToolCall> calls = new ArrayList<>();
        final List<ToolCallDelta> pieces = new ArrayList<>();

        ParsedDelta delta() {
            return new ParsedDelta("", content.toString(), calls, pieces);
        }
    }

    /**
     * Consumes as much of the pending text as can be decided. Text after a call's pieces waits
     * for the next step (so that within a step content precedes calls), except at the end.
     */
    private void advance(Out out, boolean end) {
        while (true) {
            switch (state) {
                case TEXT -> {
                    if (!out.pieces.isEmpty() && !end) {
                        return;
                    }
                    int open = pending.indexOf(OPEN);
                    if (open >= 0) {
                        emitContent(out.content, pending.substring(0, open), true);
                        pending.delete(0, open + OPEN.length());
                        state = State.HEAD;
                        continue;
                    }
                    int hold = TagScanner.partialSuffix(pending, OPEN);
                    emitContent(out.content, pending.substring(0, pending.length() - hold), false);
                    pending.delete(0, pending.length() - hold);
                    return;
                }
                case HEAD -> {
                    if (!head(out)) {
                        return;
                    }
                }
                case ARGS -> {
                    if (!args(out)) {
                        return;
                    }
                }
                case WHOLE -> {
                    int close = pending.indexOf(CLOSE);
                    if (close < 0) {
                        return;
                    }
                    String body = pending.substring(0, close);
                    pending.delete(0, close + CLOSE.length());
                    state = State.TEXT;
                    ToolCall call = parse(body);
                    if (call != null) {
                        out.pieces.add(new ToolCallDelta(call.index(), call.id(), call.name(), ""));
                        out.pieces.add(new ToolCallDelta(call.index(), null, null, call.arguments()));
                        out.calls.add(call);
                    } else {
                        emitContent(out.content, OPEN + body + CLOSE, false);
                    }
                }
                case BROKEN -> {
                    int close = pending.indexOf(CLOSE);
                    if (close < 0) {
                        return;
                    }
                    String rest = pending.substring(0, close);
                    pending.delete(0, close + CLOSE.length());
                    closeCall(out);
                    emitContent(out.content, rest, false);
                }
            }
        }
    }

    /** At a call's head: announces an XML call to a known function, or reads the call whole. False: wait for more text. */
    private boolean head(Out out) {
        int at = 0;
        while (at < pending.length() && Character.isWhitespace(pending.charAt(at))) {
            at++;
        }
        String rest = pending.substring(at);
        if (rest.isEmpty() || (rest.length() < FUNCTION_OPEN.length() && FUNCTION_OPEN.startsWith(rest))) {
            return false;
        }
        if (!rest.startsWith(FUNCTION_OPEN)) {
            state = State.WHOLE; // JSON format, or not a call: decided at the closing tag
            return true;
        }
        int gt = rest.indexOf('>');
        int nl = rest.indexOf('\n');
        if (gt < 0 && nl < 0) {
            return false;
        }
        if (gt < 0 || (nl >= 0 && nl < gt)) {
            state = State.WHOLE;
            return true;
        }
        String name = rest.substring(FUNCTION_OPEN.length(), gt).strip();
        if (!tools.has(name)) {
            state = State.WHOLE;
            return true;
        }
        int consumed = at + gt + 1;
        if (consumed == pending.length()) {
            return false; // the newline after the header may follow
        }
        if (pending.charAt(consumed) == '\n') {
            consumed++;
        }
        callText.setLength(0);
        callText.append(pending, 0, consumed);
        pending.delete(0, consumed);
        callId = ids.get();
        callName = name;
        callArgs.setLength(0);
        out.pieces.add(new ToolCallDelta(nextIndex, callId, name, ""));
        state = State.ARGS;
        return true;
    }

    /** In a streamed call: one parameter, or the call's end. False: wait for more text. */
    private boolean args(Out out) {
        int at = 0;
        while (at < pending.length() && Character.isWhitespace(pending.charAt(at))) {
            at++;
        }
        String rest = pending.substring(at);
        if (rest.isEmpty()) {
            return false;
        }
        if (rest.startsWith(PARAM_OPEN)) {
            int gt = rest.indexOf('>');
            int nl = rest.indexOf('\n');
            if (gt < 0 && nl < 0) {
                return false;
            }
            if (gt < 0 || (nl >= 0 && nl < gt)) {
                state = State.BROKEN;
                return true;
            }
            int close = rest.indexOf(PARAM_CLOSE, gt + 1);
            if (close < 0) {
                return false;
            }
            String key = rest.substring(PARAM_OPEN.length(), gt).strip();
            String value = rest.substring(gt + 1, close);
            if (value.startsWith("\n")) {
                value = value.substring(1);
            }
            if (value.endsWith("\n")) {
                value = value.substring(0, value.length() - 1);
            }
            String fragment = (callArgs.isEmpty() ? "{" : ",") + JSON.getNodeFactory().textNode(key) + ":" + typed(callName, key, value);
            callArgs.append(fragment);
            out.pieces.add(new ToolCallDelta(nextIndex, null, null, fragment));
            callText.append(pending, 0, at + close + PARAM_CLOSE.length());
            pending.delete(0, at + close + PARAM_CLOSE.length());
            return true;
        }
        if (rest.startsWith(FUNCTION_CLOSE)) {
            String after = rest.substring(FUNCTION_CLOSE.length());
            int close = after.indexOf(CLOSE);
            if (close < 0) {
                if (!after.isBlank() && TagScanner.partialSuffix(after.strip(), CLOSE) != after.strip().length()) {
                    callText.append(pending, 0, at + FUNCTION_CLOSE.length());
                    pending.delete(0, at + FUNCTION_CLOSE.length());
                    state = State.BROKEN;
                    return true;
                }
                return false;
            }
            String between = after.substring(0, close);
            pending.delete(0, at + FUNCTION_CLOSE.length() + close + CLOSE.length());
            closeCall(out);
            if (!between.isBlank()) {
                emitContent(out.content, between, false);
            }
            return true;
        }
        if (rest.startsWith(CLOSE)) { // </function> left out: the call ends with its closing tag
            pending.delete(0, at + CLOSE.length());
            closeCall(out);
            return true;
        }
        if (PARAM_OPEN.startsWith(rest) || FUNCTION_CLOSE.startsWith(rest) || CLOSE.startsWith(rest)) {
            return false;
        }
        state = State.BROKEN; // stray text: the call keeps what it has, the rest of it is content
        return true;
    }

    /** Ends the streamed call: its arguments object is closed and the whole call released. */
    private void closeCall(Out out) {
        String fragment = callArgs.isEmpty() ? "{}" : "}";
        callArgs.append(fragment);
        out.pieces.add(new ToolCallDelta(nextIndex, null, null, fragment));
        out.calls.add(new ToolCall(nextIndex++, callId, callName, callArgs.toString()));
        callArgs.setLength(0);
        callText.setLength(0);
        callId = null;
        callName = null;
        state = State.TEXT;
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

    /** A call read whole (JSON format, or XML that was not streamed): null when it is not a call to a known tool. */
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
        return ReplyParser.merge(List.of(p.next(text), p.finish()));
    }
}

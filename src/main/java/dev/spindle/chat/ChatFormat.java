package dev.spindle.chat;

import dev.spindle.grammar.EitherRecognizer;
import dev.spindle.grammar.JsonRecognizer;
import dev.spindle.grammar.Recognizer;
import dev.spindle.grammar.Schema;
import dev.spindle.model.ModelConfig;
import dev.spindle.tokenizer.Tokenizer;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The Nanbeige family's chat dialect in one place: its tags (reasoning, tool calls, turns), the ids
 * that end a reply, whether a rendered prompt leaves the model reasoning, and the reply parser. The
 * server and the CLI take all of these from here; the reply parsers and the tool-call grammar
 * (ToolCallRecognizer) are written against these tags.
 *
 * <pre>
 *   &lt;think&gt;\n reasoning \n&lt;/think&gt;\n\n content
 *   &lt;tool_call&gt;\n&lt;function=NAME&gt;\n&lt;parameter=KEY&gt;\nVALUE\n&lt;/parameter&gt;\n&lt;/function&gt;\n&lt;/tool_call&gt;
 *   ... &lt;|im_end|&gt;
 * </pre>
 */
public final class ChatFormat {
    public static final String THINK_OPEN = "<think>";
    public static final String THINK_CLOSE = "</think>";
    public static final String CALL_OPEN = "<tool_call>";
    public static final String CALL_CLOSE = "</tool_call>";
    public static final String FUNCTION_OPEN = "<function=";
    public static final String FUNCTION_CLOSE = "</function>";
    public static final String PARAMETER_OPEN = "<parameter=";
    public static final String PARAMETER_CLOSE = "</parameter>";
    public static final String END_OF_TURN = "<|im_end|>";
    /** The start of every turn marker ({@code <|im_start|>}, {@code <|im_end|>}). */
    public static final String TURN_MARKER = "<|im_";
    /** The markup no free value (a tool-call string, a JSON string inside a call) may contain. */
    public static final List<String> MARKUP = List.of(CALL_OPEN, CALL_CLOSE, FUNCTION_OPEN, FUNCTION_CLOSE, PARAMETER_OPEN, PARAMETER_CLOSE,
            THINK_OPEN, THINK_CLOSE, TURN_MARKER);

    /** The dialect of Nanbeige 4.x (and the bundled models, trained on its template). */
    public static final ChatFormat NANBEIGE = new ChatFormat();

    private ChatFormat() {
    }

    /** The dialect a model speaks; Nanbeige's for every supported family. */
    public static ChatFormat of(ModelConfig config) {
        return NANBEIGE;
    }

    /** The ids that end a reply: the config's EOS ids and the end of turn, {@code <|im_end|>}. */
    public Set<Integer> endOfTurnIds(ModelConfig config, Tokenizer tokenizer) {
        Set<Integer> ids = new HashSet<>(config.eosTokenIds());
        int imEnd = tokenizer.addedTokenId(END_OF_TURN);
        if (imEnd >= 0) {
            ids.add(imEnd);
        }
        return Set.copyOf(ids);
    }

    /** The id of {@code </think>} (where a reply's grammar starts to apply), or -1 when the tokenizer has none. */
    public int reasoningEndId(Tokenizer tokenizer) {
        return tokenizer.addedTokenId(THINK_CLOSE);
    }

    /** Whether a rendered prompt ends inside an open think block (its last {@code <think>} is not closed). */
    public boolean promptOpensReasoning(String prompt) {
        int open = prompt.lastIndexOf(THINK_OPEN);
        return open >= 0 && prompt.indexOf(THINK_CLOSE, open) < 0;
    }

    /** The streaming parser of a reply: reasoning, then content with tool calls. */
    public ReplyParser replyParser(String prompt, ToolSchemas tools, Supplier<String> callIds) {
        return new ReplyParser(promptOpensReasoning(prompt), tools, callIds);
    }

    /**
     * The grammar a reply is held to, or null for none: a forced call ({@code forced}: the functions it may call; with
     * {@code requireCall} and {@code parallel}, one or more calls), else under {@code auto} free text until a call opens
     * and then the tools' schemas (where the calls are written in the template's XML format and every name can be
     * written), and with a response schema either a forced call or the JSON document.
     *
     * @param offered the tools offered under auto, or null
     * @param forced  the functions a forced call may name (tool_choice required or a named function), or null
     */
    public Recognizer replyGrammar(ToolSchemas offered, Map<String, Schema> forced, boolean requireCall, boolean parallel, boolean xmlCalls,
                                   Schema responseSchema) {
        Recognizer grammar = null;
        // names the XML format cannot hold: under auto the calls are parsed but not constrained
        boolean writable = offered != null && ToolCallRecognizer.unwritableName(offered.functions()) == null;
        if (forced != null) {
            grammar = ToolCallRecognizer.forced(forced, requireCall && parallel);
        } else if (writable && xmlCalls) {
            grammar = ToolCallRecognizer.lazy(offered.functions(), parallel); // free text until <tool_call>, then the tools' schemas
        }
        if (responseSchema != null) {
            Recognizer json = JsonRecognizer.start(responseSchema);
            grammar = grammar == null ? json : EitherRecognizer.of(ToolCallRecognizer.forced(offered.functions(), parallel), json);
        }
        return grammar;
    }
}

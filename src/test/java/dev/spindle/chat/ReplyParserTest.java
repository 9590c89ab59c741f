package dev.spindle.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Reasoning and tool-call parsing, whole and streamed: every case is also fed split at
 * every possible boundary (two pieces) and one character at a time, and must give the
 * same reasoning, content and calls.
 */
class ReplyParserTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final List<?> WEATHER = (List<?>) JsonValues.toValue(json("""
            [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties":
              {"city": {"type": "string"}, "days": {"type": "integer"}, "note": {"type": "string"}, "opts": {"type": "object"}}}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]"""));

    static JsonNode json(String s) {
        try {
            return JSON.readTree(s);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static Supplier<String> ids() {
        AtomicInteger n = new AtomicInteger();
        return () -> "call_" + n.getAndIncrement();
    }

    /** Parses whole, then checks every split gives the same. */
    static ParsedDelta parse(String text, boolean inReasoning, List<?> tools) {
        ToolSchemas schemas = ToolSchemas.of(tools);
        ParsedDelta whole = ReplyParser.parseAll(text, inReasoning, schemas, ids());
        for (int cut = 0; cut <= text.length(); cut++) {
            ReplyParser p = new ReplyParser(inReasoning, schemas, ids());
            ParsedDelta split = ReplyParser.merge(List.of(p.next(text.substring(0, cut)), p.next(text.substring(cut)), p.finish()));
            assertEquals(whole, split, "split at " + cut + " of " + JSON.valueToTree(text));
        }
        ReplyParser p = new ReplyParser(inReasoning, schemas, ids());
        List<ParsedDelta> steps = new ArrayList<>();
        text.codePoints().forEach(cp -> steps.add(p.next(new String(Character.toChars(cp)))));
        steps.add(p.finish());
        assertEquals(whole, ReplyParser.merge(steps), "one character at a time: " + JSON.valueToTree(text));
        piecesMakeTheCalls(whole);
        return whole;
    }

    /** A streamed call opens with its id and name, and its argument fragments concatenate to its final arguments. */
    static void piecesMakeTheCalls(ParsedDelta d) {
        for (ToolCall c : d.toolCalls()) {
            List<ToolCallDelta> pieces = d.callDeltas().stream().filter(x -> x.index() == c.index()).toList();
            assertTrue(!pieces.isEmpty() && pieces.getFirst().opens(), "call " + c.index() + " opens with its name: " + pieces);
            assertEquals(c.id(), pieces.getFirst().id());
            assertEquals(c.name(), pieces.getFirst().name());
            assertTrue(pieces.stream().skip(1).noneMatch(ToolCallDelta::opens), "one opening piece per call: " + pieces);
            assertEquals(c.arguments(), String.join("", pieces.stream().map(ToolCallDelta::arguments).toList()), "fragments of call " + c.index());
        }
        assertTrue(d.toolCalls().size() <= (int) d.callDeltas().stream().filter(ToolCallDelta::opens).count(), "every released call was announced");
        // the pieces of every announced call concatenate to a JSON object (a cut-off call's too)
        for (ToolCallDelta open : d.callDeltas().stream().filter(ToolCallDelta::opens).toList()) {
            String all = String.join("", d.callDeltas().stream().filter(x -> x.index() == open.index()).map(ToolCallDelta::arguments).toList());
            assertTrue(json(all).isObject(), "call " + open.index() + "'s pieces: " + all);
        }
    }

    @Test
    void xmlCallArgumentsStreamParameterByParameter() {
        ReplyParser p = new ReplyParser(false, ToolSchemas.of(WEATHER), ids());
        List<String> fragments = new ArrayList<>();
        String[] steps = {"<tool_call>\n<function=get_weather>\n", "<parameter=city>\nOslo\n</parameter>\n", "<parameter=days>\n3\n</parameter>\n",
                "</function>\n</tool_call>"};
        ParsedDelta first = p.next(steps[0]);
        assertEquals(List.of(new ToolCallDelta(0, "call_0", "get_weather", "")), first.callDeltas(), "the call is announced once it is named");
        for (int i = 1; i < steps.length; i++) {
            ParsedDelta d = p.next(steps[i]);
            assertEquals(1, d.callDeltas().size(), "one fragment per step: " + d);
            fragments.add(d.callDeltas().getFirst().arguments());
        }
        assertEquals(List.of("{\"city\":\"Oslo\"", ",\"days\":3", "}"), fragments);
    }

    @Test
    void reasoningThenReply() {
        ParsedDelta d = parse("The user greets me.\n</think>\n\nHello! How can I help?", true, null);
        assertEquals("The user greets me.", d.reasoning());
        assertEquals("Hello! How can I help?", d.content());
    }

    @Test
    void emptyReasoningBlockOfThinkingOff() {
        ParsedDelta d = parse("<think>\n\n</think>\n\nHi.", false, null);
        assertEquals("", d.reasoning());
        assertEquals("Hi.", d.content());
    }

    @Test
    void modelOpensItsOwnThinkBlock() {
        ParsedDelta d = parse("\n<think>\nplan: add\n</think>\n\n4", false, null);
        assertEquals("plan: add", d.reasoning());
        assertEquals("4", d.content());
    }

    @Test
    void thinkingOffReplyIsAllContentEvenWithTagsLater() {
        ParsedDelta d = parse("Tags like <think> inside text stay text.", false, null);
        assertEquals("", d.reasoning());
        assertEquals("Tags like <think> inside text stay text.", d.content());
    }

    @Test
    void unterminatedThinkBlockIsAllReasoning() {
        ParsedDelta d = parse("still thinking\nabout it\n", true, null);
        assertEquals("still thinking\nabout it", d.reasoning());
        assertEquals("", d.content());
    }

    @Test
    void multiLineReasoningKeepsInnerNewlines() {
        ParsedDelta d = parse("\nline 1\n\nline 2\n</think>\n\nanswer\n\nwith paragraphs", true, null);
        assertEquals("line 1\n\nline 2", d.reasoning());
        assertEquals("answer\n\nwith paragraphs", d.content());
    }

    @Test
    void xmlToolCallsTypedBySchema() {
        String text = "The user wants weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
                + "<parameter=days>\n2\n</parameter>\n<parameter=note>\n42\nsecond line\n</parameter>\n<parameter=opts>\n{\"units\": \"C\"}\n</parameter>\n"
                + "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=city>\n北京\n</parameter>\n</function>\n</tool_call>";
        ParsedDelta d = parse(text, true, WEATHER);
        assertEquals("The user wants weather.", d.reasoning());
        assertEquals("Let me check.", d.content());
        assertEquals(2, d.toolCalls().size());
        ToolCall a = d.toolCalls().get(0);
        assertEquals("get_weather", a.name());
        assertEquals(json("{\"city\": \"New York\", \"days\": 2, \"note\": \"42\\nsecond line\", \"opts\": {\"units\": \"C\"}}"), json(a.arguments()));
        assertEquals(0, a.index());
        assertEquals("call_0", a.id());
        assertEquals(json("{\"city\": \"北京\"}"), json(d.toolCalls().get(1).arguments()));
        assertEquals(1, d.toolCalls().get(1).index());
    }

    @Test
    void jsonToolCallFormat() {
        ParsedDelta d = parse("</think>\n\nSearching.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", true, WEATHER);
        assertEquals("Searching.", d.content());
        assertEquals("get_time", d.toolCalls().getFirst().name());
        assertEquals(json("{\"city\": \"Oslo\"}"), json(d.toolCalls().getFirst().arguments()));
    }

    @Test
    void malformedCallsComeBackAsContent() {
        String unknown = "<tool_call>\n<function=launch_rockets>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>";
        assertEquals(unknown, parse(unknown, false, WEATHER).content());
        assertTrue(parse(unknown, false, WEATHER).toolCalls().isEmpty());
        // a call the stream cuts off is streamed (and its pieces closed), but never released as a call: its text is content
        String unclosed = "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n<parameter=city>\nPar";
        ParsedDelta d = parse(unclosed, false, WEATHER);
        assertEquals("Sure.<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n<parameter=city>\nPar", d.content());
        assertTrue(d.toolCalls().isEmpty());
        assertEquals("{\"days\":2}", String.join("", d.callDeltas().stream().map(ToolCallDelta::arguments).toList()));
        String unnamed = "Sure.\n<tool_call>\n<funct";
        assertEquals("Sure.<tool_call>\n<funct", parse(unnamed, false, WEATHER).content());
        String stray = "<tool_call>\n<function=get_time>\n<parameter=city>\nLima\n</parameter>\noops\n</function>\n</tool_call> after";
        ParsedDelta s = parse(stray, false, WEATHER);
        assertEquals(json("{\"city\": \"Lima\"}"), json(s.toolCalls().getFirst().arguments()));
        assertEquals("oops\n</function>\n after", s.content());
        String garbage = "<tool_call>\nnot a call at all\n</tool_call> after";
        assertEquals(garbage, parse(garbage, false, WEATHER).content());
        String badJson = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]}\n</tool_call>";
        assertEquals(badJson, parse(badJson, false, WEATHER).content());
    }

    @Test
    void withoutToolsCallsAreContent() {
        String text = "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>";
        assertEquals(text, parse(text, false, null).content());
    }

    @Test
    void textAfterACallIsContent() {
        ParsedDelta d = parse("<tool_call>\n<function=get_time>\n<parameter=city>\nLima\n</parameter>\n</function>\n</tool_call>\nDone.", false, WEATHER);
        assertEquals("Done.", d.content());
        assertEquals(1, d.toolCalls().size());
    }

    /**
     * Every assistant turn in the shared template goldens, as the model would write it
     * (the text after the generation prompt), parses back into the message it came from.
     */
    @Test
    void everyAssistantFormInTheTemplateGoldens() throws IOException {
        int checked = 0;
        for (String line : Files.readAllLines(Path.of("src/test/resources/chat/nanbeige-4.2/chat_template_goldens.jsonl"))) {
            JsonNode c = JSON.readTree(line);
            if (!c.has("expected")) {
                continue;
            }
            String expected = c.get("expected").asText();
            List<JsonNode> assistants = new ArrayList<>();
            c.get("messages").forEach(m -> {
                if (m.path("role").asText().equals("assistant")) {
                    assistants.add(m);
                }
            });
            String marker = "<|im_start|>assistant\n<think>\n";
            int from = 0;
            for (JsonNode m : assistants) {
                int at = expected.indexOf(marker, from) + marker.length();
                int end = expected.indexOf("<|im_end|>", at);
                String written = expected.substring(at, end);
                from = end;
                boolean preserved = !written.startsWith("\n</think>") || m.path("reasoning_content").asText("").isBlank();
                List<?> tools = (List<?>) JsonValues.toValue(c.get("tools"));
                ParsedDelta d = parse(written, true, tools);
                String content = m.path("content").asText("");
                String reasoning = m.path("reasoning_content").asText("");
                if (content.contains("</think>")) { // reasoning written inline in the content
                    reasoning = content.substring(content.indexOf("<think>") + 7, content.indexOf("</think>")).strip();
                    content = content.substring(content.indexOf("</think>") + 8).strip();
                }
                if (preserved) {
                    assertEquals(reasoning.strip(), d.reasoning(), c.get("name") + ": reasoning");
                }
                assertEquals(content.strip(), d.content(), c.get("name") + ": content");
                JsonNode calls = m.path("tool_calls");
                assertEquals(calls.size(), d.toolCalls().size(), c.get("name") + ": tool calls");
                for (int i = 0; i < calls.size(); i++) {
                    JsonNode fn = calls.get(i).has("function") ? calls.get(i).get("function") : calls.get(i);
                    assertEquals(fn.get("name").asText(), d.toolCalls().get(i).name());
                    JsonNode args = fn.get("arguments").isTextual() ? json(fn.get("arguments").asText()) : fn.get("arguments");
                    assertEquals(args, json(d.toolCalls().get(i).arguments()), c.get("name") + ": arguments of call " + i);
                }
                checked++;
            }
        }
        System.out.println("[parsers] " + checked + " assistant turns from the template goldens parse back, whole and split at every boundary");
        assertTrue(checked >= 5);
    }

}

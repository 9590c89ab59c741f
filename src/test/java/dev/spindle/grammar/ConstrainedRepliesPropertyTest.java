package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.InputFormat;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import dev.spindle.Trials;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.chat.ChatFormat;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ReplyParser;
import dev.spindle.chat.ToolCallRecognizer;
import dev.spindle.chat.ToolSchemas;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.sched.EngineCore;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.sample.SamplingParams;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Schemas generated from the supported subset; replies sampled from the bundled model at
 * temperature 1.0 (its top_k 20, top_p 0.95) under the constraint, several seeds a schema;
 * every reply that finishes by itself parses and validates against its schema, checked by
 * an independent JSON-schema validator (networknt). The same for forced tool calls: the
 * parsed arguments validate against the tool's parameters.
 */
class ConstrainedRepliesPropertyTest {
    static final Path MODEL = Path.of("models/spindle-chat-target");
    static final ObjectMapper JSON = new ObjectMapper();
    static final SchemaRegistry VALIDATOR = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    static final int SEEDS = 4;
    static LoadedModel model;
    static Tokenizer tok;
    static CpuForwardPass cpu;
    static ChatTemplate template;
    static TokenTexts texts;
    static Set<Integer> eos;
    static final AtomicInteger finished = new AtomicInteger(), cut = new AtomicInteger();

    @BeforeAll
    static void load() {
        model = ModelLoader.load(MODEL, LoadFormat.SAFETENSORS, LoadListener.NONE);
        tok = Tokenizer.load(MODEL);
        cpu = new CpuForwardPass(model.config(), model.weights(), 4096, 16);
        template = ChatTemplate.fromModelDir(MODEL);
        texts = TokenTexts.load(MODEL.resolve("tokenizer.json"), model.config().vocabSize());
        eos = ChatFormat.of(model.config()).endOfTurnIds(model.config(), tok);
    }

    @AfterAll
    static void close() {
        System.out.printf("[constrained] %d replies finished by themselves and validated, %d cut at max_tokens%n", finished.get(), cut.get());
        assertTrue(finished.get() >= cut.get(), "most replies finish by themselves");
        cpu.close();
        tok.close();
        model.close();
    }

    static final List<String> NAMES = List.of("answer", "unit", "value", "name", "ok", "count", "items", "city");

    /** A schema of the supported subset: scalars, enums, const, arrays, nested objects, anyOf with null. */
    static ObjectNode schema(RandomGenerator r, int depth) {
        return switch (r.nextInt(depth > 0 ? 6 : 5)) {
            case 0 -> JSON.createObjectNode().put("type", Trials.oneOf(r, "string", "integer", "number", "boolean"));
            case 1 -> {
                ObjectNode s = JSON.createObjectNode().put("type", "string");
                distinct(r, List.of("km", "m", "celsius", "yes", "no")).forEach(s.putArray("enum")::add);
                yield s;
            }
            case 2 -> JSON.createObjectNode().put("const", Trials.between(r, -5, 100));
            case 3 -> {
                ObjectNode s = JSON.createObjectNode().put("type", "array").put("minItems", Trials.between(r, 0, 1)).put("maxItems", Trials.between(r, 1, 3));
                s.putObject("items").put("type", Trials.oneOf(r, "string", "integer"));
                yield s;
            }
            case 4 -> {
                ObjectNode s = JSON.createObjectNode();
                ArrayNode any = s.putArray("anyOf");
                any.addObject().put("type", "null");
                any.addObject().put("type", "integer");
                yield s;
            }
            default -> object(r, depth - 1);
        };
    }

    /** One to three distinct values of the list, in random order. */
    static List<String> distinct(RandomGenerator r, List<String> values) {
        List<String> shuffled = new ArrayList<>(values);
        Collections.shuffle(shuffled, r);
        return shuffled.subList(0, Trials.between(r, 1, 3));
    }

    static ObjectNode object(RandomGenerator r, int depth) {
        ObjectNode s = JSON.createObjectNode().put("type", "object");
        ObjectNode p = s.putObject("properties");
        ArrayNode required = s.putArray("required");
        int requiredMask = r.nextInt(8);
        int i = 0;
        for (String n : distinct(r, NAMES)) {
            p.set(n, schema(r, depth));
            if ((requiredMask >> i & 1) == 1) {
                required.add(n);
            }
            i++;
        }
        String additional = Trials.oneOf(r, "absent", "false", "true");
        if (!additional.equals("absent")) {
            s.put("additionalProperties", Boolean.parseBoolean(additional));
        }
        return s;
    }

    /** An object schema (its properties nested one level at most), and the seed of its replies' sampling. */
    record Case(ObjectNode schema, long seed) {
    }

    static Case generate(RandomGenerator r) {
        return new Case(object(r, 1), r.nextLong());
    }

    /** Samples {@link #SEEDS} replies at once; returns each reply's text, or null where it ran to max_tokens. */
    static List<String> sample(String prompt, java.util.function.Supplier<GrammarConstraint> constraint, long seed) {
        EngineCore core = new EngineCore(cpu, 512, SEEDS, eos);
        int[] ids = tok.encode(prompt);
        List<List<Integer>> out = new ArrayList<>();
        String[] finish = new String[SEEDS];
        for (int k = 0; k < SEEDS; k++) {
            List<Integer> tokens = new ArrayList<>();
            out.add(tokens);
            int index = k;
            SamplingParams p = new SamplingParams(1.0, 20, 0.95, 0, seed * 31 + k, 0, 0, 1, Map.of(), 160, Set.of(), false, -1, constraint, -1);
            core.add(k, ids, p, new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    if (!eos.contains(e.token())) {
                        tokens.add(e.token());
                    }
                    if (e.finishReason() != null) {
                        finish[index] = e.finishReason();
                    }
                }

                @Override
                public void onError(Throwable error) {
                    throw new AssertionError(error);
                }
            });
        }
        while (!core.idle()) {
            core.step();
        }
        List<String> replies = new ArrayList<>();
        for (int k = 0; k < SEEDS; k++) {
            boolean byItself = "stop".equals(finish[k]);
            (byItself ? finished : cut).incrementAndGet();
            replies.add(byItself ? tok.decode(out.get(k).stream().mapToInt(Integer::intValue).toArray(), true) : null);
        }
        return replies;
    }

    static void assertValid(JsonNode schema, String doc, String what) {
        var errors = VALIDATOR.getSchema(schema.toString()).validate(doc, InputFormat.JSON);
        assertEquals(List.of(), errors.stream().map(Object::toString).toList(), what + " " + doc + " against " + schema);
    }

    @Test
    void jsonSchemaRepliesValidate() {
        Trials.forAll(20, ConstrainedRepliesPropertyTest::generate, c -> jsonSchemaRepliesValidate(c.schema(), c.seed()));
    }

    static void jsonSchemaRepliesValidate(ObjectNode schema, long seed) throws Exception {
        List<Map<String, Object>> messages = List.of(
                Map.of("role", "system", "content", "Reply only with a JSON object of the form {\"answer\": ...}."),
                Map.of("role", "user", "content", "What is 47 + 38?"));
        String prompt = template.render(messages, null, Map.of("add_generation_prompt", true, "enable_thinking", false));
        Schema compiled = Schema.compile(schema);
        for (String reply : sample(prompt, () -> new GrammarConstraint(compiled, texts, eos, -1), seed)) {
            if (reply != null) {
                JSON.readTree(reply); // it parses; validated as written: re-serialized, a number past double's range (1e999) became "Infinity"
                assertValid(schema, reply, "reply");
            }
        }
    }

    @Test
    void forcedToolCallsValidate() {
        Trials.forAll(20, ConstrainedRepliesPropertyTest::generate, c -> forcedToolCallsValidate(c.schema(), c.seed()));
    }

    static void forcedToolCallsValidate(ObjectNode parameters, long seed) throws Exception {
        ObjectNode tool = JSON.createObjectNode().put("type", "function");
        tool.putObject("function").put("name", "get_weather").put("description", "Current weather for a city.").set("parameters", parameters);
        List<?> tools = (List<?>) JsonValues.toValue(JSON.createArrayNode().add(tool));
        String prompt = template.render(List.of(Map.of("role", "user", "content", "What's the weather in Oslo?")), tools,
                Map.of("add_generation_prompt", true, "enable_thinking", false));
        Recognizer calls = ToolCallRecognizer.forced(Map.of("get_weather", Schema.compile(parameters)), false);
        for (String reply : sample(prompt, () -> new GrammarConstraint(calls, texts, eos, -1), seed)) {
            if (reply == null) {
                continue;
            }
            ParsedDelta parsed = ReplyParser.parseAll(reply, false, ToolSchemas.of(tools), () -> "call_1");
            assertEquals(1, parsed.toolCalls().size(), "one call in " + reply);
            assertEquals("get_weather", parsed.toolCalls().getFirst().name());
            assertTrue(parsed.content().isEmpty(), "nothing but the call: " + reply);
            assertValid(parameters, parsed.toolCalls().getFirst().arguments(), "arguments of " + reply);
        }
    }
}

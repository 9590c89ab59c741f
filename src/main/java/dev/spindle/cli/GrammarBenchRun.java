package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ToolCallRecognizer;
import dev.spindle.grammar.GrammarConstraint;
import dev.spindle.grammar.JsonRecognizer;
import dev.spindle.grammar.Recognizer;
import dev.spindle.grammar.Schema;
import dev.spindle.grammar.TokenTexts;
import dev.spindle.grammar.TokenTrie;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;
import java.util.function.Supplier;

/**
 * {@code spindle bench --grammar-tokenizer FILE}: what constrained decoding costs per step at a
 * vocabulary's real size. Sequences walk a JSON-schema grammar and the tool-call grammars
 * (forced, and lazy under free text) by drawing random allowed tokens; every step is timed as
 * the engine pays it: the logits row refreshed (a copy, standing in for the forward pass's new
 * row), the mask computed and applied in place. Batch 1 times
 * one sequence's steps on one thread; the batched figure times a step of {@code sequences}
 * sequences as the engine runs it: their masks prepared at once on the common pool (in the
 * engine, while the forward pass runs), then their rows copied and masked on the pool.
 */
final class GrammarBenchRun implements Callable<Integer> {
    private final Path tokenizer;
    private final int sequences;
    private final int steps;

    GrammarBenchRun(Path tokenizer, int sequences, int steps) {
        this.tokenizer = tokenizer;
        this.sequences = sequences;
        this.steps = steps;
    }

    static final String SCHEMA = """
            {"type": "object", "properties": {"city": {"type": "string"}, "temperature": {"type": "number"},
             "unit": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]}, "days": {"type": "integer"},
             "conditions": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
             "wind": {"type": "object", "properties": {"speed": {"type": "number"}, "direction": {"type": "string"}}, "required": ["speed"]}},
             "required": ["city", "temperature", "unit"], "additionalProperties": false}""";

    /** A recursive node ($defs, $ref) whose values carry the rules added since: formats, a pattern, numeric bounds, a length bound. */
    static final String RULES_SCHEMA = """
            {"$defs": {"Node": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
              "name": {"type": "string", "pattern": "^[A-Z][a-z]+( [A-Z][a-z]+)*$"}, "score": {"type": "number", "minimum": 0, "maximum": 100},
              "count": {"type": "integer", "minimum": 1, "maximum": 500, "multipleOf": 5}, "when": {"type": "string", "format": "date-time"},
              "note": {"type": "string", "maxLength": 60}, "kind": {"enum": ["leaf", "branch", 1.5]},
              "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 3}},
              "required": ["id", "name", "score", "children"], "additionalProperties": false}}, "$ref": "#/$defs/Node"}""";

    /** Grammars timed, by name: the first schema's constructs, then one construct each (so a slow one shows alone). */
    static final Map<String, String> SCHEMAS = new LinkedHashMap<>();

    static {
        SCHEMAS.put("json_schema", SCHEMA);
        SCHEMAS.put("json_schema_rules", RULES_SCHEMA);
        SCHEMAS.put("json_schema_ref_recursion", """
                {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                 "required": ["v", "next"], "additionalProperties": false}""");
        SCHEMAS.put("json_schema_pattern_format", """
                {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\\\d{4}$"}, "email": {"type": "string", "format": "email"},
                 "ip": {"type": "string", "format": "ipv6"}, "day": {"type": "string", "format": "date"}}, "required": ["code", "email", "ip", "day"],
                 "additionalProperties": false}""");
        SCHEMAS.put("json_schema_numeric_bounds", """
                {"type": "object", "properties": {"p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "n": {"type": "integer", "minimum": -40, "maximum": 40},
                 "m": {"type": "number", "multipleOf": 0.25}, "xs": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9999}}},
                 "required": ["p", "n", "m", "xs"], "additionalProperties": false}""");
        SCHEMAS.put("json_schema_string_lengths", """
                {"type": "object", "properties": {"short": {"type": "string", "maxLength": 12}, "long": {"type": "string", "minLength": 5, "maxLength": 400}},
                 "required": ["short", "long"], "additionalProperties": false}""");
    }

    @Override
    public Integer call() throws Exception {
        ObjectMapper json = new ObjectMapper();
        long t0 = System.nanoTime();
        TokenTexts texts = TokenTexts.load(tokenizer);
        double loadSeconds = (System.nanoTime() - t0) / 1e9;
        long t1 = System.nanoTime();
        TokenTrie trie = texts.trie();
        double trieSeconds = (System.nanoTime() - t1) / 1e9;
        Map<String, Schema> tools = new LinkedHashMap<>();
        tools.put("get_weather", Schema.compile(json.readTree("""
                {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                 "days": {"type": "integer"}}, "required": ["city"]}""")));
        tools.put("search", Schema.compile(json.readTree("""
                {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                 "filters": {"type": "object", "properties": {"site": {"type": "string"}, "recent": {"type": "boolean"}}}}, "required": ["query"]}""")));
        int eos = -1;
        for (int id = 0; id < texts.size(); id++) {
            if (texts.text(id) == null) {
                eos = id; // any special token stands in for the end of turn
                break;
            }
        }
        Set<Integer> ends = eos < 0 ? Set.of() : Set.of(eos);
        Map<String, Supplier<Recognizer>> grammars = new LinkedHashMap<>();
        for (var e : SCHEMAS.entrySet()) {
            Schema compiled = Schema.compile(json.readTree(e.getValue()));
            grammars.put(e.getKey(), () -> JsonRecognizer.start(compiled));
        }
        grammars.put("tool_call_forced", () -> ToolCallRecognizer.forced(tools, true));
        grammars.put("tool_call_lazy", () -> ToolCallRecognizer.lazy(tools, true));

        ObjectNode out = json.createObjectNode();
        out.put("benchmark", "grammar_mask");
        out.put("tokenizer", tokenizer.toString());
        out.put("vocab", texts.size());
        out.put("tokens_with_text", trie.tokens());
        out.put("trie_nodes", trie.nodes());
        out.put("load_seconds", round(loadSeconds, 3));
        out.put("trie_build_seconds", round(trieSeconds, 3));
        out.put("threads", ForkJoinPool.getCommonPoolParallelism());
        ObjectNode targets = out.putObject("targets_ms");
        targets.put("per_sequence_step", 1.0);
        targets.put("step_of_" + sequences + "_sequences", 5.0);
        for (var g : grammars.entrySet()) {
            // warm-up: the JIT compiles the walk before anything is timed
            walk(g.getValue(), texts, ends, 4, Math.min(steps, 60), new Random(1), false, null);
            double[] cpu = new double[steps];
            double[] single = walk(g.getValue(), texts, ends, 1, steps, new Random(2), false, cpu);
            double[] batched = walk(g.getValue(), texts, ends, sequences, steps, new Random(3), true, null);
            ObjectNode r = out.putObject(g.getKey());
            r.set("batch_1", stats(json, single));
            r.set("batch_1_thread_cpu", stats(json, Arrays.copyOf(cpu, single.length))); // the step's own CPU time: steadier than wall time on a shared host
            r.set("batch_" + sequences, stats(json, batched));
            r.put("per_sequence_step_target_met", percentile(single, 50) <= 1.0 && mean(single) <= 1.0);
            r.put("batched_step_target_met", mean(batched) <= 5.0);
        }
        System.out.println(json.enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(out));
        return 0;
    }

    /**
     * Runs {@code n} sequences for up to {@code maxSteps} steps (a finished one starts over);
     * returns the time of each step in ms: per sequence (batch 1) or per step of all n.
     */
    private static double[] walk(Supplier<Recognizer> grammar, TokenTexts texts, Set<Integer> ends, int n, int maxSteps, Random rnd, boolean batched,
                                 double[] cpuMs) {
        var threads = java.lang.management.ManagementFactory.getThreadMXBean();
        GrammarConstraint[] cs = new GrammarConstraint[n];
        for (int i = 0; i < n; i++) {
            cs[i] = new GrammarConstraint(grammar.get(), texts, ends, -1);
        }
        float[] row = new float[texts.size()];
        float[][] masked = new float[n][texts.size()]; // each sequence's logits row, as the forward pass hands it over
        List<Double> times = new ArrayList<>();
        for (int step = 0; step < maxSteps; step++) {
            long s0 = System.nanoTime(), c0 = cpuMs == null ? 0 : threads.getCurrentThreadCpuTime();
            if (batched) { // as the engine does: masks prepared on the pool, then each row copied and masked on the pool
                List<ForkJoinTask<?>> tasks = new ArrayList<>();
                for (GrammarConstraint c : cs) {
                    tasks.add(ForkJoinPool.commonPool().submit(c::prepare));
                }
                tasks.forEach(ForkJoinTask::join);
                tasks.clear();
                for (int i = 0; i < n; i++) {
                    int index = i;
                    tasks.add(ForkJoinPool.commonPool().submit(() -> {
                        System.arraycopy(row, 0, masked[index], 0, row.length);
                        cs[index].mask(masked[index]);
                    }));
                }
                tasks.forEach(ForkJoinTask::join);
            } else {
                for (int i = 0; i < n; i++) {
                    System.arraycopy(row, 0, masked[i], 0, row.length);
                    cs[i].mask(masked[i]);
                }
            }
            times.add((System.nanoTime() - s0) / 1e6);
            if (cpuMs != null) {
                cpuMs[step] = (threads.getCurrentThreadCpuTime() - c0) / 1e6;
            }
            for (int i = 0; i < n; i++) {
                int t = pick(masked[i], texts, rnd);
                if (t < 0 || ends.contains(t)) {
                    cs[i] = new GrammarConstraint(grammar.get(), texts, ends, -1);
                } else {
                    cs[i].accept(t);
                }
            }
        }
        return times.stream().mapToDouble(Double::doubleValue).toArray();
    }

    /**
     * A random allowed token: half the time one with a special character (so that strings close and
     * documents finish), otherwise any; the end of turn once it is allowed, a third of the time.
     */
    private static int pick(float[] masked, TokenTexts texts, Random rnd) {
        int[] any = new int[masked.length], structural = new int[masked.length]; // no boxing: the timed steps should not pay for this one's garbage
        int nAny = 0, nStructural = 0, end = -1;
        for (int id = 0; id < masked.length; id++) {
            if (masked[id] == Float.NEGATIVE_INFINITY) {
                continue;
            }
            String t = texts.text(id);
            if (t == null) {
                end = id;
                continue;
            }
            any[nAny++] = id;
            for (int k = 0; k < t.length(); k++) {
                if (TokenTrie.special(t.charAt(k)) || "{}[]:,".indexOf(t.charAt(k)) >= 0) {
                    structural[nStructural++] = id;
                    break;
                }
            }
        }
        if (end >= 0 && (nAny == 0 || rnd.nextInt(3) == 0)) {
            return end;
        }
        if (nAny == 0) {
            return -1;
        }
        return nStructural > 0 && rnd.nextBoolean() ? structural[rnd.nextInt(nStructural)] : any[rnd.nextInt(nAny)];
    }

    private static ObjectNode stats(ObjectMapper json, double[] ms) {
        ObjectNode s = json.createObjectNode();
        s.put("steps", ms.length);
        s.put("mean_ms", round(mean(ms), 4));
        s.put("p50_ms", round(percentile(ms, 50), 4));
        s.put("p99_ms", round(percentile(ms, 99), 4));
        s.put("max_ms", round(Arrays.stream(ms).max().orElse(0), 4));
        return s;
    }

    private static double mean(double[] v) {
        return Arrays.stream(v).average().orElse(0);
    }

    private static double percentile(double[] v, double p) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length == 0 ? 0 : s[(int) Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
    }

    private static double round(double v, int digits) {
        double s = Math.pow(10, digits);
        return Math.round(v * s) / s;
    }
}

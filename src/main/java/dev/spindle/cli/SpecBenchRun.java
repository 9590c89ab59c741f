package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.spindle.backend.cuda.CudaBench;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.chat.ChatFormat;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.engine.SpecStats;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.sched.EngineCore;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.sample.SamplingParams;
import dev.spindle.tokenizer.Tokenizer;
import dev.spindle.wiring.Backends;
import dev.spindle.wiring.Proposers;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Callable;
import dev.spindle.wiring.ModelFiles;

/**
 * {@code spindle bench --speculative-method ...}: speculative decoding on the engine, drafted against
 * plain greedy decoding of the same requests in the same run, at several batch sizes; on CUDA also
 * the cost of verifying windows of 1 to 16 rows and the batch-1 speed those costs allow at several
 * accepted lengths (a projection, labelled so). Prompts are the bundled chat questions when the
 * model has a tokenizer and real weights, else seeded random ids (a dummy model's greedy output
 * repeats itself, so prompt lookup still drafts).
 */
public final class SpecBenchRun implements Callable<Integer> {
    private final ModelOptions model;
    private final SpeculativeConfig cfg;
    private final String backend;
    private final int[] batches;
    private final int maxTokens, promptTokens, stepRows;
    private final double kvMemoryFraction;
    private final java.nio.file.Path promptFile;
    private long ids;

    private final double temperature, topP;

    /** How the requests decode, for the JSON. */
    private String sampling() {
        return temperature == 0 ? "greedy" : "sampled at temperature " + temperature + ", top-p " + topP + " (seeded per request)";
    }

    SpecBenchRun(ModelOptions model, SpeculativeConfig cfg, String backend, int[] batches, int maxTokens, int promptTokens, int stepRows,
                 double kvMemoryFraction, java.nio.file.Path promptFile, double temperature, double topP) {
        if (temperature < 0 || !(topP > 0 && topP <= 1)) {
            throw new IllegalArgumentException("--spec-temperature must be >= 0 and --spec-top-p in (0, 1], got " + temperature + " and " + topP);
        }
        this.temperature = temperature;
        this.topP = topP;
        this.promptFile = promptFile;
        this.model = model;
        this.cfg = cfg;
        this.backend = backend;
        this.batches = batches;
        this.maxTokens = maxTokens;
        this.promptTokens = promptTokens;
        this.stepRows = stepRows;
        this.kvMemoryFraction = kvMemoryFraction;
    }

    @Override
    public Integer call() throws Exception {
        int maxBatch = java.util.Arrays.stream(batches).max().orElse(1);
        int perSequence = promptTokens + maxTokens + cfg.numTokens() + 64;
        Backends.Kind kind = Backends.Kind.parse(backend);
        Backends.Settings settings = new Backends.Settings(model.threadCount(), model.blockSize,
                kind == Backends.Kind.CPU ? model.blocksFor(maxBatch * perSequence * 2) * model.blockSize : 0, stepRows, kvMemoryFraction, true,
                model.gemmCacheDir()).withCudaKernels(model.cudaKernels()).withGpuMemoryLimit(model.gpuMemoryLimit());
        Map<String, Object> out = new LinkedHashMap<>();
        try (Backends.Opened target = Backends.open(model.dir(), model.format(), kind, Proposers.targetSettings(cfg, settings), LoadListener.NONE)) {
            Speculation spec = Proposers.open(cfg, model.dir(), target, model.format(), settings, LoadListener.NONE);
            boolean chat = model.format() != LoadFormat.DUMMY && (promptFile != null || Files.isRegularFile(model.dir().resolve("tokenizer.json")));
            List<int[]> prompts = new ArrayList<>();
            Set<Integer> eos = Set.of();
            if (chat && promptFile != null) {
                prompts.addAll(promptIds(promptFile));
                if (prompts.size() < maxBatch) {
                    throw new IllegalArgumentException(promptFile + " holds " + prompts.size() + " prompts, fewer than the largest batch " + maxBatch);
                }
                eos = Set.copyOf(target.config().eosTokenIds());
            } else if (chat) {
                try (Tokenizer tok = ModelFiles.tokenizer(model.dir())) {
                    ChatTemplate template = ModelFiles.chatTemplate(model.dir());
                    for (String q : questions(maxBatch)) {
                        prompts.add(tok.encode(template.render(List.of(Map.of("role", "user", "content", q)), null, Map.of("add_generation_prompt", true))));
                    }
                    eos = ChatFormat.of(target.config()).endOfTurnIds(target.config(), tok);
                }
            } else {
                // ids every model here can read: a drafter's vocabulary may stop short of the target's padded one, and real text
                // never holds the padding ids (a prompt that does is not drafted for: the drafter cannot read it)
                int vocab = target.config().vocabSize();
                if (cfg.method() == SpeculativeConfig.Method.DRAFT) {
                    vocab = Math.min(vocab, ConfigParser.read(cfg.draftModel().resolve("config.json")).vocabSize());
                }
                Random rnd = new Random(11);
                for (int i = 0; i < maxBatch; i++) {
                    prompts.add(rnd.ints(promptTokens, 3, vocab).toArray());
                }
            }
            out.put("model", model.dir().toString());
            out.put("load_format", model.format().name().toLowerCase());
            out.put("backend", target.description());
            out.put("speculative", cfg.describe());
            out.put("proposer", spec.proposer().describe());
            out.put("prompts", chat ? "the bundled chat questions" + (promptFile != null ? " (token ids from " + promptFile + ")" : "")
                    + ", " + sampling() + ", stopping at the end of turn" : "seeded random ids of " + promptTokens
                    + " tokens, " + sampling() + ", " + maxTokens + " tokens each");
            List<Map<String, Object>> runs = new ArrayList<>();
            for (int b : batches) {
                // warm-up of both paths on the measured requests themselves: the JIT, and the CUDA graphs and GEMM plans of
                // every step shape the run meets (a drafted run meets many: its windows' rows vary with acceptance), as a
                // server has them after its first requests of a kind
                measure(target, Speculation.NONE, prompts.subList(0, b), eos, chat, maxTokens);
                measure(target, spec, prompts.subList(0, b), eos, chat, maxTokens);
                Run plain = measure(target, Speculation.NONE, prompts.subList(0, b), eos, chat, maxTokens);
                Run drafted = measure(target, spec, prompts.subList(0, b), eos, chat, maxTokens);
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("batch", b);
                r.put("plain_tokens_per_second", round(plain.tokensPerSecond(), 1));
                r.put("drafted_tokens_per_second", round(drafted.tokensPerSecond(), 1));
                r.put("drafted_over_plain", round(drafted.tokensPerSecond() / plain.tokensPerSecond(), 3));
                if (temperature == 0) { // sampled runs draw other tokens from the same distribution: only greedy ones compare
                    r.put("same_tokens_as_plain", plain.tokens.equals(drafted.tokens));
                }
                SpecStats st = drafted.stats;
                r.put("drafted_tokens", st.draftTokens());
                r.put("accepted_tokens", st.acceptedTokens());
                r.put("acceptance_rate", round(st.acceptanceRate(), 3));
                r.put("mean_tokens_per_drafted_window", round(st.meanAcceptedLength(), 3));
                // per draft position, the share of windows whose draft there was accepted (vLLM's accepted-per-position over drafts)
                List<Double> perPosition = new ArrayList<>();
                for (long a : st.acceptedAtPosition()) {
                    perPosition.add(round(st.drafts() == 0 ? 0 : (double) a / st.drafts(), 3));
                }
                r.put("accepted_per_position_over_windows", perPosition);
                r.put("drafted_steps", st.draftedSteps());
                r.put("steps", drafted.steps);
                r.put("plain_steps", plain.steps);
                if (st.draftedSteps() > 0) {
                    double verifyMs = st.draftedStepNanos() / 1e6 / st.draftedSteps(), proposeMs = st.proposerNanos() / 1e6 / st.draftedSteps();
                    r.put("verify_ms_per_drafted_step", round(verifyMs, 3));
                    r.put("propose_ms_per_drafted_step", round(proposeMs, 3));
                    // every step's parts (drafted or not): the target's forward pass, the proposer's intake of the committed rows
                    r.put("forward_ms_per_step", round(st.forwardNanos() / 1e6 / Math.max(1, st.steps()), 3));
                    r.put("observe_ms_per_step", round(st.observeNanos() / 1e6 / Math.max(1, st.steps()), 3));
                    // what the measured costs allow: the drafted steps' tokens over their verify and draft time
                    double allowed = st.draftedStepTokens() / ((st.draftedStepNanos() + st.proposerNanos()) / 1e9);
                    r.put("drafted_steps_allowed_tokens_per_second", round(allowed, 1));
                }
                runs.add(r);
            }
            out.put("runs", runs);
            if (target.pass() instanceof CudaForwardPass gpu) {
                CudaBench bench = new CudaBench(gpu);
                List<Map<String, Object>> costs = new ArrayList<>();
                for (int b : new int[]{1, 32}) {
                    for (int rows : new int[]{1, 2, 4, 8, 16}) {
                        costs.add(bench.verifyCost(b, rows, 1024, 20));
                    }
                }
                out.put("verify_cost_context_1024", costs);
                out.put("projection_batch_1", projection(costs, runs));
            }
            spec.proposer().close();
        }
        System.out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(out));
        return 0;
    }

    /**
     * Batch-1 tokens per second at mean tokens per window 2, 3, 4 and 6 (accepted drafts + 1), from the measured cost of a window
     * of k + 1 rows and, for a draft model, its measured drafting time per step at batch 1; a projection from measured costs, not a run.
     */
    private Map<String, Object> projection(List<Map<String, Object>> costs, List<Map<String, Object>> runs) {
        double one = 0, window = 0;
        int rows = cfg.numTokens() + 1;
        for (Map<String, Object> c : costs) {
            if ((int) c.get("batch") == 1 && (int) c.get("rows_per_window") == 1) {
                one = (double) c.get("step_ms");
            }
            if ((int) c.get("batch") == 1 && (int) c.get("rows_per_window") == Integer.highestOneBit(rows * 2 - 1)) {
                window = (double) c.get("step_ms"); // the measured window size at or above k + 1
            }
        }
        double propose = 0;
        for (Map<String, Object> r : runs) {
            if ((int) r.get("batch") == 1 && r.containsKey("propose_ms_per_drafted_step")) {
                propose = (double) r.get("propose_ms_per_drafted_step");
            }
        }
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("label", "projection from measured costs: plain = 1000 / decode_step_ms; drafted = L * 1000 / (verify_ms(window >= k + 1) + propose_ms)");
        p.put("decode_step_ms", one);
        p.put("verify_window_ms", window);
        p.put("propose_ms", propose);
        p.put("plain_tokens_per_second", round(1000 / one, 1));
        for (double len : new double[]{2, 3, 4, 6}) {
            p.put("tokens_per_second_at_" + (int) len, round(len * 1000 / (window + propose), 1));
        }
        return p;
    }

    record Run(double tokensPerSecond, List<List<Integer>> tokens, SpecStats stats, long steps) {
    }

    /** Runs the prompts together to the end; times the decode phase (after every request has its first token). */
    private Run measure(Backends.Opened target, Speculation spec, List<int[]> prompts, Set<Integer> eos, boolean chat, int max) {
        EngineCore core = new EngineCore(target.pass(), stepRows, prompts.size(), eos, spec);
        List<List<Integer>> tokens = new ArrayList<>();
        int[] first = {0};
        for (int[] p : prompts) {
            List<Integer> mine = new ArrayList<>();
            tokens.add(mine);
            SamplingParams params = temperature == 0 ? SamplingParams.greedy(max)
                    : SamplingParams.builder().temperature(temperature).topP(topP).seed(1000L + tokens.size()).maxTokens(max).build();
            core.add(++ids, p, params.withIgnoreEos(!chat), new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    if (mine.isEmpty()) {
                        first[0]++;
                    }
                    mine.add(e.token());
                }

                @Override
                public void onError(Throwable error) {
                    throw new IllegalStateException("a bench request failed: " + error.getMessage(), error);
                }
            });
        }
        while (first[0] < prompts.size() && !core.idle()) {
            core.step();
        }
        long before = core.stats().generatedTokens(), steps0 = core.stats().steps();
        SpecStats s0 = core.stats().speculative();
        long t0 = System.nanoTime();
        while (!core.idle()) {
            core.step();
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        long decoded = core.stats().generatedTokens() - before;
        SpecStats s1 = core.stats().speculative();
        SpecStats delta = s1.since(s0);
        return new Run(decoded / Math.max(1e-9, seconds), tokens, delta, core.stats().steps() - steps0);
    }

    /** The prompts of a {@code --spec-prompts} file: {@code {"prompts": [[id, ...], ...]}}. */
    public static List<int[]> promptIds(java.nio.file.Path file) {
        try {
            List<int[]> out = new ArrayList<>();
            var root = new ObjectMapper().readTree(file.toFile()).path("prompts");
            if (!root.isArray()) {
                throw new IllegalArgumentException(file + ": expected {\"prompts\": [[token ids], ...]}");
            }
            for (var p : root) {
                int[] ids = new int[p.size()];
                for (int i = 0; i < ids.length; i++) {
                    ids[i] = p.get(i).asInt();
                }
                out.add(ids);
            }
            return out;
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException(file + ": " + e.getMessage(), e);
        }
    }

    /** The chat questions the speculative bench and tests ask (arithmetic, counting, dates, comparisons, conversions). */
    public static List<String> questions(int n) {
        List<String> q = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            q.add(switch (i % 6) {
                case 0 -> "What is " + (12 + i) + " + " + (31 + 2 * i) + "?";
                case 1 -> "How many r's are in strawberry?";
                case 2 -> "Is " + (1896 + 4 * i) + " a leap year?";
                case 3 -> "Which is bigger, 9.11 or 9." + (i % 9 + 1) + "?";
                case 4 -> "Convert " + (i + 3) + " km to meters.";
                default -> "What is " + (i + 7) + " times " + (i % 5 + 3) + "?";
            });
        }
        return q;
    }

    private static double round(double v, int digits) {
        double s = Math.pow(10, digits);
        return Math.round(v * s) / s;
    }
}

package dev.spindle.engine.sched;

import dev.spindle.backend.ForwardingPass;
import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuDraftHead;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.cli.SpecBenchRun;
import dev.spindle.engine.SpecStats;
import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.speculative.DFlashProposer;
import dev.spindle.engine.speculative.DraftModelProposer;
import dev.spindle.engine.speculative.NgramProposer;
import dev.spindle.engine.speculative.Proposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.grammar.GrammarConstraint;
import dev.spindle.grammar.Schema;
import dev.spindle.grammar.TokenTexts;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.sample.SamplingParams;
import dev.spindle.sample.TokenRules;
import dev.spindle.step.DraftHead;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;
import dev.spindle.step.StepOutput;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Speculative decoding inside the engine, on the bundled chat target with its bundled drafter and
 * with prompt lookup: greedy replies (tokens and logprobs) are bit-identical to plain decoding's,
 * alone and in batches of 1, 7 and 64; seeded sampled replies reproduce, alone or batched; every
 * block of both pools comes back.
 */
class SpeculativeEngineTest {
    static final Path TARGET = Path.of("models/spindle-chat-target"), DRAFTER = Path.of("models/spindle-chat-drafter");
    static LoadedModel target, drafter;
    static List<int[]> prompts = new ArrayList<>();
    static int imEnd;

    /** The prompts as token ids (the device has no tokenizer): the bench's chat questions, tokenized once and committed. */
    static final Path PROMPTS = Path.of("src/test/resources/fixtures/chat-target/spec-prompts.json");

    /** The models and the committed prompts, without the tokenizer (what the GPU test needs). */
    static void loadModels() {
        loadTarget();
        drafter = ModelLoader.load(DRAFTER, LoadFormat.SAFETENSORS, LoadListener.NONE);
    }

    /** The target and the prompts only (the DFlash tests need no drafter). */
    static void loadTarget() {
        target = ModelLoader.load(TARGET, LoadFormat.SAFETENSORS, LoadListener.NONE);
        imEnd = target.config().eosTokenIds().iterator().next();
        prompts = SpecBenchRun.promptIds(PROMPTS);
    }

    @BeforeAll
    static void load() {
        loadModels();
        // the committed ids are the questions as the template and tokenizer render them today
        try (Tokenizer tok = Tokenizer.load(TARGET)) {
            assertEquals(imEnd, tok.addedTokenId("<|im_end|>"), "the config's end of sequence is the template's end of turn");
            ChatTemplate template = ChatTemplate.fromModelDir(TARGET);
            List<String> questions = SpecBenchRun.questions(prompts.size());
            for (int i = 0; i < questions.size(); i++) {
                int[] ids = tok.encode(template.render(List.of(Map.of("role", "user", "content", questions.get(i))), null,
                        Map.of("add_generation_prompt", true)));
                org.junit.jupiter.api.Assertions.assertArrayEquals(ids, prompts.get(i), PROMPTS + " prompt " + i + " is stale");
            }
        }
    }

    @AfterAll
    static void close() {
        target.close();
        if (drafter != null) {
            drafter.close();
            drafter = null;
        }
    }

    static CpuForwardPass targetPass() {
        return new CpuForwardPass(target.config(), target.weights(), 512, 16, 2, KvSlots.PER_EXECUTED_LAYER);
    }

    static Speculation draftModel(int k) {
        CpuForwardPass d = new CpuForwardPass(drafter.config(), drafter.weights(), 512, 16, 2, KvSlots.PER_EXECUTED_LAYER);
        return new Speculation(new DraftModelProposer(d, target.config().vocabSize(), 512, d), k, 64);
    }

    /** A DFlash or DFlash2 head (the parity test's random heads) beside the CPU target: it drafts, rarely well. */
    static Speculation dflash(String head, int k, java.lang.foreign.Arena arena) {
        return dflash(Path.of("src/test/resources/fixtures/dflash", head), k, arena);
    }

    static Speculation dflash(Path dir, int k, java.lang.foreign.Arena arena) {
        return dflash(dir, k, arena, false);
    }

    /** @param sampled at temperature &gt; 0, drafts drawn from the head's distribution and verified against it on the host */
    static Speculation dflash(Path dir, int k, java.lang.foreign.Arena arena, boolean sampled) {
        DraftHeadConfig hc = DraftHeadConfig.read(dir);
        var weights = DraftHeadLoader.load(dir, hc, arena, LoadListener.NONE);
        var cpuHead = new CpuDraftHead(hc, weights, target.weights().embedding().data(), target.weights().lmHead(),
                target.config().vocabSize(), hc.tapLayers(1), 2, null);
        return new Speculation(new DFlashProposer(cpuHead, sampled), k, 64);
    }

    /**
     * DFlash heads in the engine: the target's taps of every committed row reach the head after each step (prefill
     * chunks, plain decode rows, and a drafted window's anchor and accepted rows), and drafted greedy equals plain
     * greedy in batches of 1 and 7, on a device-drawing pass too, and after preemption with prefix-cache hits (context
     * the head never saw is left out).
     */
    @Test
    void dflashDraftedGreedyEqualsPlainGreedy() {
        try (CpuForwardPass pass = targetPass(); java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            DeviceDrawWiringTest.HostRuleDrawing device = new DeviceDrawWiringTest.HostRuleDrawing(pass);
            for (String head : List.of("dflash-random", "dflash2-random")) {
                for (int batch : new int[]{1, 7}) {
                    List<int[]> ps = prompts.subList(0, batch);
                    Result plain = run(pass, Speculation.NONE, ps, SpeculativeEngineTest::greedy);
                    for (ForwardPass p : List.of(pass, device)) {
                        Speculation spec = dflash(head, 7, arena);
                        try (Proposer pr = spec.proposer()) {
                            Result drafted = run(p, spec, ps, p == pass ? SpeculativeEngineTest::greedy : i -> SamplingParams.greedy(48));
                            Result expected = p == pass ? plain : run(p, Speculation.NONE, ps, i -> SamplingParams.greedy(48));
                            assertEquals(expected.signatures(), drafted.signatures(), head + " batch " + batch);
                            assertTrue(drafted.spec().draftTokens() > 0, head + " drafted");
                            System.out.printf("[speculative] CPU %s batch %d: %d drafted, acceptance %.3f%n", head, batch, drafted.spec().draftTokens(),
                                    drafted.spec().acceptanceRate());
                        }
                    }
                }
            }
        }
        // preemption and prefix-cache hits, as for the draft model: 16 requests in a pool of 20 blocks
        try (CpuForwardPass small = new CpuForwardPass(target.config(), target.weights(), 20, 16, 2, KvSlots.PER_EXECUTED_LAYER);
             java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            List<int[]> ps = new ArrayList<>(prompts.subList(0, 8));
            ps.addAll(prompts.subList(0, 8));
            Result plain = runCounting(small, Speculation.NONE, ps);
            Speculation spec = dflash("dflash2-random", 7, arena);
            try (Proposer pr = spec.proposer()) {
                Result drafted = runCounting(small, spec, ps);
                assertEquals(plain.signatures(), drafted.signatures(), "under preemption and prefix-cache hits");
                assertTrue(drafted.spec().draftTokens() > 0);
            }
        }
    }

    /**
     * The trained heads (models/spindle-chat-dflash and -dflash2) in the engine: greedy drafted = plain with most drafts accepted,
     * and seeded sampled drafting (drafts drawn from the head's own distribution, q handed to the verifier) at the
     * model's temperatures reproduces, and is the same alone and batched.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"models/spindle-chat-dflash", "models/spindle-chat-dflash2"})
    void theTrainedDFlashHeadsDraftWellGreedyAndSampled(String dir) {
        Path head = Path.of(dir);
        List<int[]> ps = prompts.subList(0, 7);
        try (CpuForwardPass pass = targetPass(); java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            Result plain = run(pass, Speculation.NONE, ps, SpeculativeEngineTest::greedy);
            Speculation spec = dflash(head, 7, arena);
            try (Proposer p = spec.proposer()) {
                Result drafted = run(pass, spec, ps, SpeculativeEngineTest::greedy);
                assertEquals(plain.signatures(), drafted.signatures());
                System.out.printf("[speculative] CPU %s, batch 7: %d drafted, acceptance %.3f, %.2f tokens a window; steps %d vs %d%n",
                        head.getFileName(), drafted.spec().draftTokens(), drafted.spec().acceptanceRate(), drafted.spec().meanAcceptedLength(), drafted.steps(), plain.steps());
                assertTrue(drafted.spec().acceptanceRate() > 0.5, "the trained head's drafts are mostly accepted: " + drafted.spec().acceptanceRate());
            }
            for (double t : new double[]{0.6, 1.0}) {
                Function<Integer, SamplingParams> sampled = i -> new SamplingParams(t, 20, 0.95, 0, 2000L + i, 0, 0, 1, Map.of(), 40, Set.of(), false,
                        1, null, -1);
                List<String> batched, again, alone = new ArrayList<>();
                double acceptance;
                Speculation s1 = dflash(head, 7, arena, true);
                try (Proposer p = s1.proposer()) {
                    Result r = run(pass, s1, ps, sampled);
                    batched = r.signatures();
                    acceptance = r.spec().acceptanceRate();
                }
                Speculation s2 = dflash(head, 7, arena, true);
                try (Proposer p = s2.proposer()) {
                    again = run(pass, s2, ps, sampled).signatures();
                }
                for (int i = 0; i < ps.size(); i++) {
                    int index = i;
                    Speculation s3 = dflash(head, 7, arena, true);
                    try (Proposer p = s3.proposer()) {
                        alone.add(run(pass, s3, List.of(ps.get(i)), j -> sampled.apply(index)).signatures().getFirst());
                    }
                }
                assertEquals(batched, again, "seeded sampled DFlash drafting reproduces at temperature " + t);
                assertEquals(batched, alone, "a seeded request drafted by DFlash is the same alone and batched at temperature " + t);
                System.out.printf("[speculative] CPU %s, sampled at T %.1f: acceptance %.3f%n", head.getFileName(), t, acceptance);
                assertTrue(acceptance > 0.3, "sampled drafts from the head's q are often accepted: " + acceptance);
            }
        }
    }

    /**
     * A head that drafts the plain greedy reply (an oracle: most drafts are accepted) and records the context the
     * engine gives it. After a drafted run, every sequence's context is the target's taps of each committed row,
     * in order and bit for bit, as one prefill over the whole sequence computes them: the anchor and accepted rows
     * of drafted windows, plain decode rows and prompt chunks all arrive, rejected rows never do.
     */
    static class OracleHead implements DraftHead {
        final Map<Long, List<float[]>> context = new java.util.HashMap<>();
        final Map<Long, Integer> starts = new java.util.HashMap<>();
        final Map<Long, List<float[]>> finished = new java.util.HashMap<>();
        final Map<Long, int[]> replies;
        final int[] taps;

        OracleHead(Map<Long, int[]> replies, int[] taps) {
            this.replies = replies;
            this.taps = taps;
        }

        @Override
        public int blockSize() {
            return 6;
        }

        @Override
        public int[] tapLayers() {
            return taps.clone();
        }

        @Override
        public void inject(long id, int from, float[][] rows, int count) {
            List<float[]> c = context.computeIfAbsent(id, k -> new ArrayList<>());
            if (c.isEmpty()) {
                starts.put(id, from);
            }
            assertEquals(starts.get(id) + c.size(), from, "context rows follow each other");
            for (int r = 0; r < count; r++) {
                c.add(rows[r].clone());
            }
        }

        int injectCalls, widestInjection;

        @Override
        public void injectAll(List<Observation> rows) {
            injectCalls++;
            widestInjection = Math.max(widestInjection, rows.size());
            assertEquals(rows.size(), rows.stream().mapToLong(Observation::id).distinct().count(), "one entry a sequence");
            DraftHead.super.injectAll(rows);
        }

        @Override
        public int contextEnd(long id) {
            return starts.getOrDefault(id, 0) + context.getOrDefault(id, List.of()).size();
        }

        @Override
        public int contextStart(long id) {
            return starts.getOrDefault(id, 0);
        }

        @Override
        public void truncate(long id, int position) {
            List<float[]> c = context.get(id);
            if (c != null) {
                while (starts.get(id) + c.size() > position) {
                    c.removeLast();
                }
            }
        }

        @Override
        public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
            int[] reply = replies.get(id);
            int at = contextEnd(id) + 1; // the position after the anchor, in the whole sequence
            int[] out = new int[drafts];
            for (int i = 0; i < drafts; i++) {
                out[i] = at + i < reply.length ? reply[at + i] : 0;
            }
            if (drafts > 2) {
                out[drafts - 1] = (out[drafts - 1] + 1) % 4000; // a wrong last draft: some rows are rejected
            }
            return Proposal.of(out);
        }

        @Override
        public float[][] lastLogits() {
            return null;
        }

        @Override
        public void release(long id) {
            List<float[]> c = context.remove(id);
            if (c != null) {
                finished.put(id, c);
            }
            starts.remove(id);
        }

        @Override
        public String describe() {
            return "oracle head";
        }

        @Override
        public void close() {
        }
    }

    @Test
    void aHeadsContextIsTheTapsOfEveryCommittedRow() {
        int[] taps = {1, 5, 8};
        try (CpuForwardPass pass = targetPass()) {
            List<int[]> ps = prompts.subList(0, 5);
            Result plain = run(pass, Speculation.NONE, ps, SpeculativeEngineTest::greedy);
            Map<Long, int[]> whole = new java.util.HashMap<>();
            for (int i = 0; i < ps.size(); i++) {
                int[] reply = java.util.Arrays.stream(plain.signatures().get(i).split(",")).filter(x -> !x.isEmpty())
                        .mapToInt(x -> Integer.parseInt(x.substring(0, x.indexOf('/')))).toArray();
                int[] all = java.util.Arrays.copyOf(ps.get(i), ps.get(i).length + reply.length);
                System.arraycopy(reply, 0, all, ps.get(i).length, reply.length);
                whole.put((long) i + 1, all);
            }
            // the taps through the host, and held where the step left them (a head that reads the backend's device taps)
            HeldTapsPass held = new HeldTapsPass(pass);
            for (boolean onDevice : new boolean[]{false, true}) {
                checkContexts(pass, onDevice ? held : pass, onDevice ? new HeldTapsHead(whole, taps, held) : new OracleHead(whole, taps), ps, plain, whole, taps);
            }
        }
    }

    private static void checkContexts(CpuForwardPass pass, ForwardPass stepper, OracleHead head, List<int[]> ps, Result plain, Map<Long, int[]> whole,
                                      int[] taps) {
        Speculation spec = new Speculation(new DFlashProposer(head), 5, 64);
        Result drafted = run(stepper, spec, ps, SpeculativeEngineTest::greedy);
        assertEquals(plain.signatures(), drafted.signatures());
        assertTrue(drafted.spec().acceptedTokens() > drafted.spec().draftTokens() / 2, "the oracle's drafts are mostly accepted");
        // a step's committed rows of every sequence reach the head in one call
        assertTrue(head.injectCalls <= drafted.steps(), head.injectCalls + " injections for " + drafted.steps() + " steps");
        assertEquals(ps.size(), head.widestInjection, "the five sequences' rows of a step in one injection");
        for (long id = 1; id <= ps.size(); id++) {
            int[] all = whole.get(id);
            List<float[]> got = head.finished.get(id);
            // the context covers every committed row up to the last step's window (a finished sequence's last rows are not handed over)
            float[][] want = TestSteps.taps(pass, java.util.Arrays.copyOf(all, got.size()), taps, false);
            assertTrue(got.size() >= all.length - 1 - head.blockSize(), "context of " + got.size() + " rows for a sequence of " + all.length);
            for (int r = 0; r < got.size(); r++) {
                org.junit.jupiter.api.Assertions.assertArrayEquals(want[r], got.get(r), "sequence " + id + " row " + r);
            }
        }
    }

    /**
     * A pass that holds a step's taps back where it was asked to keep them ({@code ModelStep.tapsToHost} false), as the
     * CUDA pass keeps them on its device: the CPU pass's taps, in the step's row order, with null taps in the output.
     */
    static final class HeldTapsPass extends ForwardingPass {
        final List<float[]> rows = new ArrayList<>();

        HeldTapsPass(ForwardPass inner) {
            super(inner);
        }

        @Override
        public StepOutput execute(ModelStep step) {
            var out = inner.execute(new ModelStep(step.windows(), step.tapLayers(), true));
            rows.clear();
            if (step.tapsToHost() || step.tapLayers().length == 0) {
                return out;
            }
            List<float[][]> none = new ArrayList<>();
            for (float[][] w : out.taps()) {
                rows.addAll(java.util.Arrays.asList(w));
                none.add(null);
            }
            return new StepOutput(out.logits(), out.tokens(), none);
        }
    }

    /** The oracle head reading a held step's taps by the rows the observations name (the CUDA head's device path). */
    static final class HeldTapsHead extends OracleHead {
        final HeldTapsPass pass;

        HeldTapsHead(Map<Long, int[]> replies, int[] taps, HeldTapsPass pass) {
            super(replies, taps);
            this.pass = pass;
        }

        @Override
        public boolean readsDeviceTaps() {
            return true;
        }

        @Override
        public void injectAll(List<Observation> rows) {
            List<Observation> onHost = new ArrayList<>();
            for (var o : rows) {
                assertTrue(o.taps() == null && o.stepRow() >= 0, "the engine asked for the taps to stay where the step left them");
                onHost.add(new Observation(o.id(), o.from(), pass.rows.subList(o.stepRow(), o.stepRow() + o.count())
                        .toArray(float[][]::new), o.count()));
            }
            super.injectAll(onHost);
        }
    }

    static Speculation ngram(int k) {
        return new Speculation(new NgramProposer(1, 4, 0), k, 64);
    }

    /** Runs the requests to completion together on one engine; per request its events' signature. */
    static Result run(ForwardPass pass, Speculation spec, List<int[]> ps, Function<Integer, SamplingParams> params) {
        EngineCore core = new EngineCore(pass, 512, 64, Set.of(imEnd), spec);
        Map<Integer, EngineCoreTest.Collect> out = new LinkedHashMap<>();
        for (int i = 0; i < ps.size(); i++) {
            EngineCoreTest.Collect c = new EngineCoreTest.Collect();
            out.put(i, c);
            core.add(i + 1, ps.get(i), params.apply(i), c);
        }
        int guard = 0;
        while (!core.idle() && guard++ < 100_000) {
            core.step();
        }
        assertTrue(core.idle());
        assertEquals(core.pool().numBlocks(), core.pool().freeBlocks(), "every target block back");
        if (spec.proposer() instanceof DraftModelProposer d) {
            assertEquals(d.totalBlocks(), d.freeBlocks(), "every drafter block back");
        }
        List<String> sigs = new ArrayList<>();
        for (EngineCoreTest.Collect c : out.values()) {
            assertTrue(c.error == null, () -> "failed: " + c.error);
            sigs.add(c.signature());
        }
        return new Result(sigs, core.stats().speculative(), core.stats().steps());
    }

    record Result(List<String> signatures, SpecStats spec, long steps) {
    }

    static SamplingParams greedy(int i) {
        // logprobs on: the host path, which also checks the emitted tokens' logprobs equal plain decoding's
        return new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), 48, Set.of(), false, 2, null, -1);
    }

    @Test
    void draftedGreedyEqualsPlainGreedyInBatchesOf1And7And64() {
        for (int batch : new int[]{1, 7, 64}) {
            List<int[]> ps = prompts.subList(0, batch);
            try (CpuForwardPass pass = targetPass()) {
                Result plain = run(pass, Speculation.NONE, ps, SpeculativeEngineTest::greedy);
                for (String method : List.of("draft", "ngram")) {
                    Speculation spec = method.equals("draft") ? draftModel(4) : ngram(4);
                    try (Proposer p = spec.proposer()) {
                        Result drafted = run(pass, spec, ps, SpeculativeEngineTest::greedy);
                        assertEquals(plain.signatures(), drafted.signatures(), method + " drafting, batch " + batch);
                        assertTrue(drafted.spec().acceptedTokens() > 0, method + " accepted some drafts");
                        System.out.printf("[speculative] CPU %s batch %d: %d drafted, acceptance %.3f, %.2f tokens a window; steps %d vs plain %d%n",
                                method, batch, drafted.spec().draftTokens(), drafted.spec().acceptanceRate(), drafted.spec().meanAcceptedLength(),
                                drafted.steps(), plain.steps());
                    }
                }
            }
        }
    }

    /**
     * vLLM's token rules (min_tokens, bad_words, allowed_token_ids) apply to drafted rows exactly as to plain ones, on a
     * device-drawing pass too (where a sequence with an active rule is sampled on the host): drafted = plain, and
     * the rules hold in the output.
     */
    @Test
    void tokenRulesHoldInDraftedWindows() {
        int[] banned = {prompts.get(0)[prompts.get(0).length - 1]};
        Function<Integer, SamplingParams> ruled = i -> {
            SamplingParams base = SamplingParams.greedy(40);
            TokenRules rules = switch (i % 3) {
                case 0 -> new TokenRules(30, null, List.of());
                case 1 -> new TokenRules(0, null, List.of(banned, new int[]{260, 260}));
                default -> new TokenRules(0, java.util.stream.IntStream.range(0, 600).toArray(), List.of());
            };
            return base.withRules(rules);
        };
        try (CpuForwardPass pass = targetPass()) {
            DeviceDrawWiringTest.HostRuleDrawing device = new DeviceDrawWiringTest.HostRuleDrawing(pass);
            List<int[]> ps = prompts.subList(0, 9);
            Result plain = run(pass, Speculation.NONE, ps, ruled);
            for (ForwardPass p : List.of(pass, device)) {
                for (Speculation spec : List.of(draftModel(4), ngram(4))) {
                    try (Proposer pr = spec.proposer()) {
                        assertEquals(plain.signatures(), run(p, spec, ps, ruled).signatures(), spec.proposer().describe());
                    }
                }
            }
            for (int i = 0; i < ps.size(); i++) {
                int[] tokens = java.util.Arrays.stream(plain.signatures().get(i).split(",")).filter(x -> !x.isEmpty())
                        .mapToInt(x -> Integer.parseInt(x.substring(0, x.indexOf('/')))).toArray();
                switch (i % 3) {
                    case 0 -> assertTrue(tokens.length >= 30, "min_tokens 30: " + tokens.length);
                    case 1 -> assertTrue(java.util.Arrays.stream(tokens).noneMatch(t -> t == banned[0]), "a banned token");
                    default -> assertTrue(java.util.Arrays.stream(tokens).allMatch(t -> t < 600), "only allowed ids");
                }
            }
            Result free = run(pass, Speculation.NONE, ps, i -> SamplingParams.greedy(40));
            assertTrue(!free.signatures().equals(plain.signatures()), "the rules changed some replies");
        }
    }

    /** Greedy rows drawn by a device (here the host rule behind a device-drawing pass): verified from the drawn ids alone. */
    @Test
    void draftedGreedyDrawnOnTheDeviceEqualsPlain() {
        Function<Integer, SamplingParams> plainGreedy = i -> SamplingParams.greedy(40);
        try (CpuForwardPass pass = targetPass()) {
            DeviceDrawWiringTest.HostRuleDrawing device = new DeviceDrawWiringTest.HostRuleDrawing(pass);
            List<int[]> ps = prompts.subList(0, 7);
            Result plain = run(device, Speculation.NONE, ps, plainGreedy);
            Speculation spec = draftModel(4);
            try (Proposer p = spec.proposer()) {
                int before = device.drawn;
                Result drafted = run(device, spec, ps, plainGreedy);
                assertEquals(plain.signatures(), drafted.signatures());
                assertTrue(device.drawn > before, "verification rows were drawn on the device");
                assertTrue(drafted.spec().acceptedTokens() > 0);
            }
        }
    }

    /** Sampled drafting at the model's recommended temperatures: a seeded request reproduces, and equals itself alone and in a batch. */
    @Test
    void seededSampledDraftingReproducesAloneAndBatched() {
        for (double t : new double[]{0.6, 1.0}) {
            Function<Integer, SamplingParams> sampled = i -> new SamplingParams(t, 20, 0.95, 0, 1000L + i, 0, 0, 1, Map.of(), 40, Set.of(), false,
                    1, null, -1);
            List<int[]> ps = prompts.subList(0, 7);
            try (CpuForwardPass pass = targetPass()) {
                List<String> batched, again, alone = new ArrayList<>();
                Speculation s1 = draftModel(4);
                try (Proposer p = s1.proposer()) {
                    batched = run(pass, s1, ps, sampled).signatures();
                }
                Speculation s2 = draftModel(4);
                try (Proposer p = s2.proposer()) {
                    again = run(pass, s2, ps, sampled).signatures();
                }
                for (int i = 0; i < ps.size(); i++) {
                    Speculation s3 = draftModel(4);
                    int index = i;
                    try (Proposer p = s3.proposer()) {
                        alone.add(run(pass, s3, List.of(ps.get(i)), j -> sampled.apply(index)).signatures().getFirst());
                    }
                }
                assertEquals(batched, again, "seeded drafted sampling reproduces at temperature " + t);
                assertEquals(batched, alone, "a seeded drafted request is the same alone and batched at temperature " + t);
            }
        }
    }

    /**
     * Sampled at the model's temperatures with deterministic drafts (prompt lookup, the greedy draft model, a DFlash head's argmax): each row's token
     * is drawn as plain decoding draws it, with the uniform plain decoding gives that position, so a seeded request gives
     * plain sampling's very tokens, on the host and drawn on a device (the whole window at once, uniforms read ahead and
     * consumed as rows emit), alone and in a batch.
     */
    @Test
    void seededSampledDraftingWithDeterministicDraftsEqualsPlainSampling() {
        try (CpuForwardPass pass = targetPass(); java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            DeviceDrawWiringTest.HostRuleDrawing device = new DeviceDrawWiringTest.HostRuleDrawing(pass);
            for (double t : new double[]{0.6, 1.0}) {
                Function<Integer, SamplingParams> sampled = i -> new SamplingParams(t, 20, 0.95, 0, 3000L + i, 0, 0, 1, Map.of(), 40, Set.of(), false,
                        -1, null, -1);
                for (int batch : new int[]{1, 7}) {
                    List<int[]> ps = prompts.subList(0, batch);
                    Result plain = run(pass, Speculation.NONE, ps, sampled);
                    assertEquals(plain.signatures(), run(device, Speculation.NONE, ps, sampled).signatures(), "plain sampling, host and device");
                    for (ForwardPass p : List.of(pass, device)) {
                        for (String method : List.of("ngram", "draft", "dflash")) {
                            Speculation spec = switch (method) {
                                case "ngram" -> ngram(4);
                                case "draft" -> draftModel(4);
                                default -> dflash(Path.of("models/spindle-chat-dflash"), 7, arena);
                            };
                            try (Proposer pr = spec.proposer()) {
                                int before = device.drawn;
                                Result drafted = run(p, spec, ps, sampled);
                                String what = method + " at T " + t + ", batch " + batch + (p == pass ? " on the host" : " drawn on a device");
                                assertEquals(plain.signatures(), drafted.signatures(), what);
                                assertTrue(drafted.spec().acceptedTokens() > 0, what + ": some drafts accepted");
                                if (p == device) {
                                    assertTrue(device.drawn - before > drafted.spec().draftTokens(), what + ": the windows' rows were drawn on the device");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /** max_tokens and the end-of-turn id cut a drafted window exactly where plain decoding stops. */
    @Test
    void draftsNeverRunPastMaxTokensOrTheEndOfTurn() {
        try (CpuForwardPass pass = targetPass()) {
            for (int max : new int[]{1, 2, 3, 5, 17}) {
                Function<Integer, SamplingParams> p = i -> new SamplingParams(0, 0, 1, 0, null, 0, 0, 1, Map.of(), max, Set.of(), false, -1, null, -1);
                List<int[]> ps = prompts.subList(0, 8);
                Result plain = run(pass, Speculation.NONE, ps, p);
                Speculation spec = ngram(8);
                try (Proposer pr = spec.proposer()) {
                    assertEquals(plain.signatures(), run(pass, spec, ps, p).signatures(), "max_tokens " + max);
                }
            }
        }
    }

    /** A pool too small for every sequence at once: preemptions happen with drafting as without, and the replies are the same. */
    @Test
    void draftingSurvivesPreemptionAndPrefixCacheHits() {
        // 16 requests sharing their system prompt (prefix-cache hits), in a pool of 20 blocks (320 tokens): preempted and recomputed
        try (CpuForwardPass pass = new CpuForwardPass(target.config(), target.weights(), 20, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            List<int[]> ps = new ArrayList<>(prompts.subList(0, 8));
            ps.addAll(prompts.subList(0, 8)); // the same prompts again: whole-prefix hits
            Result plain = runCounting(pass, Speculation.NONE, ps);
            Speculation spec = draftModel(4);
            try (Proposer p = spec.proposer()) {
                Result drafted = runCounting(pass, spec, ps);
                assertEquals(plain.signatures(), drafted.signatures());
                assertTrue(drafted.spec().acceptedTokens() > 0);
            }
        }
    }

    static long lastPreemptions, lastPrefixHits;

    static Result runCounting(ForwardPass pass, Speculation spec, List<int[]> ps) {
        EngineCore core = new EngineCore(pass, 96, 16, Set.of(imEnd), spec);
        List<EngineCoreTest.Collect> out = new ArrayList<>();
        for (int i = 0; i < ps.size(); i++) {
            EngineCoreTest.Collect c = new EngineCoreTest.Collect();
            out.add(c);
            core.add(i + 1, ps.get(i), greedy(i), c);
        }
        while (!core.idle()) {
            core.step();
        }
        assertTrue(core.stats().preemptions() > 0, "the pool is too small for all at once: some were preempted");
        assertTrue(core.stats().prefixHitTokens() > 0, "the repeated prompts hit the prefix cache");
        assertEquals(core.pool().numBlocks(), core.pool().freeBlocks());
        List<String> sigs = new ArrayList<>();
        for (EngineCoreTest.Collect c : out) {
            assertTrue(c.error == null, () -> "failed: " + c.error);
            sigs.add(c.signature());
        }
        return new Result(sigs, core.stats().speculative(), core.stats().steps());
    }

    /**
     * Structured output with drafting: the grammar masks every verified row in its state after the rows before it, so a
     * draft the grammar forbids is rejected; greedy constrained replies equal plain ones, and sampled ones (at 0.6 and 1.0)
     * still parse as the schema's JSON.
     */
    @Test
    void draftsAreVerifiedUnderTheGrammar() throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var schema = Schema.compile(json.readTree(
                "{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":\"integer\"},\"unit\":{\"type\":\"string\",\"enum\":[\"km\",\"m\"]}},"
                        + "\"required\":[\"answer\",\"unit\"]}"));
        var texts = TokenTexts.load(TARGET.resolve("tokenizer.json"), target.config().vocabSize());
        java.util.function.Supplier<GrammarConstraint> grammar =
                () -> new GrammarConstraint(schema, texts, Set.of(imEnd), -1);
        List<int[]> ps = prompts.subList(0, 6);
        try (CpuForwardPass pass = targetPass()) {
            Function<Integer, SamplingParams> greedyJson = i -> SamplingParams.greedy(40).withConstraint(grammar);
            Result plain = run(pass, Speculation.NONE, ps, greedyJson);
            for (Speculation spec : List.of(draftModel(4), ngram(4))) {
                try (Proposer p = spec.proposer()) {
                    assertEquals(plain.signatures(), run(pass, spec, ps, greedyJson).signatures(), spec.proposer().describe());
                }
            }
            for (double t : new double[]{0.6, 1.0}) {
                Function<Integer, SamplingParams> sampledJson = i -> new SamplingParams(t, 20, 0.95, 0, 500L + i, 0, 0, 1, Map.of(), 60, Set.of(),
                        false, -1, grammar, -1);
                Speculation spec = draftModel(4);
                try (Proposer p = spec.proposer()) {
                    EngineCore core = new EngineCore(pass, 512, 16, Set.of(imEnd), spec);
                    List<StringBuilder> texts2 = new ArrayList<>();
                    List<String[]> finish = new ArrayList<>();
                    for (int i = 0; i < ps.size(); i++) {
                        StringBuilder text = new StringBuilder();
                        String[] end = {null};
                        texts2.add(text);
                        finish.add(end);
                        core.add(i + 1, ps.get(i), sampledJson.apply(i), new TokenSink() {
                            @Override
                            public void onToken(TokenEvent e) {
                                if (e.token() != imEnd) {
                                    text.append(texts.text(e.token()));
                                }
                                end[0] = e.finishReason();
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
                    for (int i = 0; i < ps.size(); i++) {
                        if ("stop".equals(finish.get(i)[0])) {
                            var node = json.readTree(texts2.get(i).toString());
                            assertTrue(node.path("answer").isIntegralNumber() && List.of("km", "m").contains(node.path("unit").asText()),
                                    "T " + t + ": " + texts2.get(i));
                        }
                    }
                }
            }
        }
    }

    /**
     * A grammar that switches on inside a drafted window (after the model's reasoning ends with {@code </think>}) on a backend
     * that draws tokens on the device: the window's rows after the switch are masked on the host, as plain decoding masks them.
     */
    @Test
    void aGrammarThatSwitchesOnInsideADraftedWindowStillMasksIt() throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var schema = Schema.compile(json.readTree("{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":\"integer\"}},"
                + "\"required\":[\"answer\"]}"));
        var texts = TokenTexts.load(TARGET.resolve("tokenizer.json"), target.config().vocabSize());
        int thinkEnd = 4004; // </think> in the bundled tokenizer; the prompts end inside <think>
        java.util.function.Supplier<GrammarConstraint> grammar =
                () -> new GrammarConstraint(schema, texts, Set.of(imEnd), thinkEnd);
        Function<Integer, SamplingParams> greedyJson = i -> SamplingParams.greedy(80).withConstraint(grammar);
        try (CpuForwardPass pass = targetPass()) {
            DeviceDrawWiringTest.HostRuleDrawing device = new DeviceDrawWiringTest.HostRuleDrawing(pass);
            List<int[]> ps = prompts.subList(0, 7);
            Result plain = run(device, Speculation.NONE, ps, greedyJson);
            for (Speculation spec : List.of(draftModel(4), ngram(4))) {
                try (Proposer p = spec.proposer()) {
                    assertEquals(plain.signatures(), run(device, spec, ps, greedyJson).signatures(), spec.proposer().describe());
                }
            }
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.KvCapacityException;
import dev.spindle.model.ModelConfig;
import dev.spindle.step.ForwardPass;
import dev.spindle.step.ModelStep.Window;
import dev.spindle.step.ModelStep;
import dev.spindle.step.StepOutput;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * The GPU benchmark behind {@code spindle bench --backend cuda}: the device's own limits
 * measured first (device-to-device copy bandwidth, bf16 GEMM peak), then prefill, batch-1
 * decode at several context lengths, aggregate decode at several concurrencies and time
 * to first token, each with its ratio to the limit that bounds it.
 * <p>
 * Decode contexts are <i>reserved</i>, not computed: the sequence's KV pages are allocated
 * and counted as written (the pool is zero-filled), so a decode step reads the full context
 * without first prefilling 128K tokens. A step's work does not depend on the KV values.
 */
public final class CudaBench {
    private final CudaForwardPass gpu;
    private final ModelConfig c;
    private final CudaDriver cuda;
    private final BlockPool pool;
    private final Random rnd = new Random(7);

    public CudaBench(CudaForwardPass gpu) {
        this.gpu = gpu;
        this.c = gpu.config();
        this.cuda = gpu.driver();
        this.pool = new BlockPool(gpu.kvCapacity());
    }

    /** A window of {@code tokens} at the table's end (its blocks reserved), wanting the last row's logits. */
    private static Window window(int[] tokens, BlockTable t) {
        t.reserve(t.tokens() + tokens.length);
        return new Window(tokens, t.tokens(), t, ModelStep.lastRow(tokens.length), null);
    }

    /** After a step: each window's positions are written. */
    private static void advance(List<Window> ws) {
        for (Window w : ws) {
            ((BlockTable) w.table()).advance(w.start() + w.tokens().length); // the tables this driver made
        }
    }

    private int[] greedy(List<Window> ws) {
        int[] ids = gpu.greedy(new ModelStep(ws));
        advance(ws);
        return ids;
    }

    /** Device-to-device copy bandwidth in GB/s (bytes read plus bytes written, as DEVICE.md counts it). */
    public static double copyBandwidth(CudaDriver cuda, long bytes) {
        long a = cuda.alloc(bytes), b = cuda.alloc(bytes);
        try {
            cuda.memsetZero(a, bytes);
            cuda.copyDeviceToDevice(b, a, bytes);
            int reps = 5;
            double s = cuda.time(() -> { for (int i = 0; i < reps; i++) cuda.copyDeviceToDevice(b, a, bytes); });
            return 2.0 * bytes * reps / s / 1e9;
        } finally {
            cuda.free(a);
            cuda.free(b);
        }
    }

    private int[] randomTokens(int n) {
        return rnd.ints(n, 3, c.vocabSize()).toArray();
    }

    /** Least time a decode figure's untimed warm-up steps take. */
    static final double DECODE_WARMUP_SECONDS = 0.1;
    /** Least time a decode figure's timed rounds take together (one round where its steps take this long). */
    static final double DECODE_TIMED_SECONDS = 0.25;

    private double seconds(Runnable r) {
        cuda.sync();
        long t0 = System.nanoTime();
        r.run();
        cuda.sync();
        return (System.nanoTime() - t0) / 1e9;
    }

    /** Prefills {@code n} tokens in chunks of the pass's step rows; the table keeps them. */
    private int prefill(BlockTable t, int[] tokens, int chunk) {
        int last = 0;
        for (int s = 0; s < tokens.length; s += chunk) {
            int[] part = java.util.Arrays.copyOfRange(tokens, s, Math.min(tokens.length, s + chunk));
            last = greedy(List.of(window(part, t)))[0];
        }
        return last;
    }

    /**
     * Prefill of a fresh {@code tokens}-token prompt: the median of {@link #prefillRuns} runs (one run over 8K
     * tokens: a single 32K prefill takes seconds), each on a new sequence.
     */
    public Map<String, Object> prefill(int tokens, int chunk, double gemmTflops) {
        Map<String, Object> skipped = KvFit.skippedPrompt(tokens, pool);
        if (skipped != null) {
            return skipped;
        }
        int runs = prefillRuns(tokens);
        double[] each = new double[runs];
        for (int r = 0; r < runs; r++) {
            BlockTable t = new BlockTable(pool);
            int[] prompt = randomTokens(tokens);
            each[r] = seconds(() -> prefill(t, prompt, chunk));
            t.release();
        }
        java.util.Arrays.sort(each);
        double s = each[runs / 2];
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("tokens", tokens);
        m.put("runs", runs);
        m.put("seconds", round(s, 4));
        m.put("tokens_per_second", round(tokens / s, 1));
        double tflops = (double) c.flopsPerToken() * tokens / s / 1e12;
        m.put("gemm_tflops_per_second", round(tflops, 1));
        m.put("fraction_of_gemm_peak", round(tflops / gemmTflops, 3));
        return m;
    }

    static int prefillRuns(int tokens) {
        return tokens <= 8192 ? 5 : 1;
    }

    /** Reserves {@code context} positions of KV (not computed) for a new sequence. */
    private BlockTable reserved(int context) {
        BlockTable t = new BlockTable(pool);
        t.reserve(context);
        t.advance(context);
        return t;
    }

    public Map<String, Object> decode(int batch, int context, int steps, double copyGBs) {
        return decode(batch, context, steps, copyGBs, false);
    }

    /**
     * Decode steps of {@code batch} sequences at {@code context}; greedy on the device, or (sampled)
     * temperature 0.8, top-k 50, top-p 0.9 drawn on the device (only ids come back either way).
     */
    public Map<String, Object> decode(int batch, int context, int steps, double copyGBs, boolean sampled) {
        Map<String, Object> skipped = KvFit.skipped(batch, context, pool);
        if (skipped != null) {
            return skipped;
        }
        List<BlockTable> tables = new ArrayList<>();
        try {
            return decode(tables, batch, context, steps, copyGBs, sampled);
        } catch (KvCapacityException e) {
            // the pool held the contexts but not the tokens the figure's steps add to them
            return KvFit.ranOut(batch, context, tables, pool, e);
        } finally {
            tables.forEach(BlockTable::release);
        }
    }

    private Map<String, Object> decode(List<BlockTable> tables, int batch, int context, int steps, double copyGBs, boolean sampled) {
        for (int i = 0; i < batch; i++) {
            tables.add(reserved(context));
        }
        int[] next = randomTokens(batch);
        Runnable step = () -> {
            List<Window> ws = new ArrayList<>(batch);
            for (int i = 0; i < batch; i++) {
                BlockTable t = tables.get(i);
                t.reserve(t.tokens() + 1);
                ModelStep.Draw d = sampled ? new ModelStep.Draw(0.8, 50, 0.9, 0, new double[]{rnd.nextDouble()}) : null;
                ws.add(new Window(new int[]{next[i]}, t.tokens(), t, ModelStep.lastRow(1), d));
            }
            if (sampled) {
                StepOutput out = gpu.execute(new ModelStep(ws));
                advance(ws);
                for (int i = 0; i < batch; i++) {
                    next[i] = out.tokens().get(i)[0];
                }
            } else {
                int[] ids = greedy(ws);
                System.arraycopy(ids, 0, next, 0, batch);
            }
        };
        // warm-up: at least 3 steps and DECODE_WARMUP_SECONDS (a small model's first steps, 3 ms each on the 3B shape, ran
        // ~5% slower than the same steps a minute later in one process: docs/bench/pairs-by-length)
        int warm = 0;
        for (double t = 0; warm < 3 || t < DECODE_WARMUP_SECONDS; warm++) {
            t += seconds(step);
        }
        // rounds of steps until DECODE_TIMED_SECONDS have been timed; the median round's step
        List<Double> rounds = new ArrayList<>();
        StepTimes before = gpu.probes().stepTimes();
        for (double t = 0; rounds.isEmpty() || t < DECODE_TIMED_SECONDS; ) {
            double s = seconds(() -> { for (int i = 0; i < steps; i++) step.run(); });
            rounds.add(s / steps);
            t += s;
        }
        StepTimes host = gpu.probes().stepTimes().since(before);
        // one more round, untimed, with each step's graph timed on the GPU by events around its launch
        gpu.probes().timeGraphs(true);
        StepTimes beforeGraphs = gpu.probes().stepTimes();
        for (int i = 0; i < steps; i++) {
            step.run();
        }
        StepTimes graphs = gpu.probes().stepTimes().since(beforeGraphs);
        gpu.probes().timeGraphs(false);
        // the same step's graph replayed back to back, without the host between steps: what a step costs the GPU alone
        double replay = Double.NaN;
        if (gpu.probes().replayedAGraph()) {
            List<Double> replays = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                replays.add(gpu.probes().replayLastGraph(Math.max(steps, 16)));
            }
            replay = replays.stream().sorted().toList().get(1);
        }
        // the same steps run ahead (asynchronous scheduling): step N + 1 started, its tokens fed on the device from N's
        // draws, before N's ids are read; the median round's step
        double ahead = Double.NaN;
        if (gpu.runsAhead()) {
            runAhead(tables, next, 3, sampled);
            List<Double> aheadRounds = new ArrayList<>();
            for (double t = 0; aheadRounds.isEmpty() || t < DECODE_TIMED_SECONDS; ) {
                double s = seconds(() -> runAhead(tables, next, steps, sampled));
                aheadRounds.add(s / steps);
                t += s;
            }
            ahead = aheadRounds.stream().sorted().toList().get(aheadRounds.size() / 2);
        }
        double perStep = rounds.stream().sorted().toList().get(rounds.size() / 2);
        long weightBytes = gpu.weights().decodeBytes(c);
        // the timed steps' mean context (every step adds a token to each sequence)
        long kvBytes = (long) batch * (context + warm + (long) rounds.size() * steps / 2) * c.executedLayers() * 2L * c.numKvHeads()
                * gpu.kvCapacity().dtype().vectorBytes(c.headDim());
        double gbs = (weightBytes + kvBytes) / perStep / 1e9;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("batch", batch);
        m.put("context_tokens", context);
        m.put("sampling", sampled ? "temperature 0.8, top-k 50, top-p 0.9, on the device" : "greedy, on the device");
        m.put("steps", steps);
        m.put("rounds", rounds.size());
        m.put("step_ms", round(perStep * 1e3, 3));
        if (!Double.isNaN(replay)) {
            // the step's graph alone, replayed back to back (the median of three runs); step_ms minus this is the host's part
            m.put("graph_replay_ms", round(replay * 1e3, 3));
        }
        if (host.steps() > 0) {
            // the timed greedy steps' host phases, mean microseconds a step: the step checked and its plan built, the plan sent,
            // the launch, the wait for the ids (the GPU's time from the launch on, and the copy back)
            m.put("host_plan_us", round(host.planNanos() / 1e3 / host.steps(), 1));
            m.put("host_send_us", round(host.sendNanos() / 1e3 / host.steps(), 1));
            m.put("host_launch_us", round(host.launchNanos() / 1e3 / host.steps(), 1));
            m.put("host_wait_us", round(host.waitNanos() / 1e3 / host.steps(), 1));
        }
        if (graphs.graphSteps() > 0) {
            // the graph's GPU time in the step loop, from the record before its launch to the one after: against
            // graph_replay_ms, what running a step after the host's part costs the GPU itself (launch latency, cold start)
            m.put("graph_in_steps_ms", round(graphs.graphNanos() / 1e6 / graphs.graphSteps(), 3));
        }
        m.put("tokens_per_second", round(batch / perStep, 1));
        if (!Double.isNaN(ahead)) {
            // the same steps started one ahead of the ids' return, as the engine runs them with --async-scheduling
            m.put("ahead_step_ms", round(ahead * 1e3, 3));
            m.put("ahead_tokens_per_second", round(batch / ahead, 1));
        }
        m.put("bytes_read_per_step", weightBytes + kvBytes);
        m.put("implied_read_gb_per_second", round(gbs, 1));
        m.put("fraction_of_copy_bandwidth", round(gbs / copyGBs, 3));
        return m;
    }

    /**
     * {@code steps} decode steps of the sequences of {@code tables} (one token each, the first ones {@code next}), each
     * started before the ids of the one before are read: its windows' tokens fed on the device from that step's draws
     * (ModelStep.fed), what the engine does with asynchronous scheduling. Leaves the last ids in {@code next}.
     */
    private void runAhead(List<BlockTable> tables, int[] next, int steps, boolean sampled) {
        int batch = tables.size();
        int[] fed = java.util.stream.IntStream.range(0, batch).toArray();
        ForwardPass.PendingStep pending = null;
        List<Window> pendingWindows = null;
        try {
            for (int s = 0; s < steps; s++) {
                List<Window> ws = new ArrayList<>(batch);
                for (BlockTable t : tables) {
                    int at = t.tokens() + (pending == null ? 0 : 1); // a table advances once its step is read
                    t.reserve(at + 1);
                    ModelStep.Draw d = sampled ? new ModelStep.Draw(0.8, 50, 0.9, 0, new double[]{rnd.nextDouble()}) : ModelStep.Draw.greedy(1);
                    ws.add(new Window(new int[]{pending == null ? next[ws.size()] : 0}, at, t, ModelStep.lastRow(1), d));
                }
                ForwardPass.PendingStep started = gpu.start(new ModelStep(ws, new int[0], true, pending == null ? new int[0] : fed));
                if (pending != null) {
                    ForwardPass.PendingStep read = pending;
                    pending = null;
                    readAhead(read, pendingWindows, next);
                }
                pending = started;
                pendingWindows = ws;
            }
        } finally {
            // the step started last is read whatever stopped the loop (a table the pool could not grow): none stays in flight
            if (pending != null) {
                readAhead(pending, pendingWindows, next);
            }
        }
    }

    private static void readAhead(ForwardPass.PendingStep pending, List<Window> ws, int[] next) {
        StepOutput out = pending.await();
        advance(ws);
        for (int i = 0; i < ws.size(); i++) {
            next[i] = out.tokens().get(i)[0];
        }
    }

    /**
     * The cost of verifying drafts: steps of {@code batch} windows of {@code rows} tokens each at {@code context}, every row's
     * argmax drawn on the device (what greedy verification of rows - 1 drafts runs), the windows' K/V rewritten in place each step.
     */
    public Map<String, Object> verifyCost(int batch, int rows, int context, int steps) {
        return verifyCost(batch, rows, context, steps, new int[0]);
    }

    /**
     * As {@link #verifyCost(int, int, int, int)}, every window tapped after {@code tapLayers} (as a DFlash head's target
     * steps are), the taps kept on the device: the last step's stay in the pass's tap buffer ({@link CudaForwardPass#deviceTaps}),
     * window i's rows from row {@code i * rows} on.
     */
    public Map<String, Object> verifyCost(int batch, int rows, int context, int steps, int[] tapLayers) {
        List<BlockTable> tables = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            BlockTable t = reserved(context);
            t.reserve(context + rows);
            tables.add(t);
        }
        Runnable step = () -> {
            List<Window> ws = new ArrayList<>(batch);
            for (BlockTable t : tables) {
                ws.add(new Window(randomTokens(rows), context, t, ModelStep.allRows(rows), ModelStep.Draw.greedy(rows), tapLayers.length > 0));
            }
            gpu.execute(new ModelStep(ws, tapLayers, false));
        };
        for (int i = 0; i < 3; i++) {
            step.run();
        }
        double s = seconds(() -> { for (int i = 0; i < steps; i++) step.run(); });
        tables.forEach(BlockTable::release);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("batch", batch);
        m.put("rows_per_window", rows);
        m.put("context_tokens", context);
        m.put("step_ms", round(s / steps * 1e3, 3));
        return m;
    }

    /** Time to the first token of a {@code tokens}-long prompt at batch 1: prefill plus greedy sampling on the device. */
    public Map<String, Object> timeToFirstToken(int tokens, int chunk) {
        double best = Double.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            BlockTable t = new BlockTable(pool);
            int[] prompt = randomTokens(tokens);
            best = Math.min(best, seconds(() -> prefill(t, prompt, chunk)));
            t.release();
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("prompt_tokens", tokens);
        m.put("milliseconds", round(best * 1e3, 2));
        return m;
    }

    /**
     * Milliseconds per operation kind of one step, launched kernel by kernel and timed on the stream:
     * a prefill of {@code rows} tokens (context 0) or, with rows = 1, a decode step of {@code batch}
     * sequences at {@code context}.
     */
    public Map<String, Object> profile(int rows, int context, int batch) {
        Map<String, Object> skipped = KvFit.skipped(batch, context + rows - 1, pool);
        if (skipped != null) {
            return skipped;
        }
        List<BlockTable> ts = new ArrayList<>();
        List<Window> ws = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            BlockTable t = context > 0 ? reserved(context) : new BlockTable(pool);
            ts.add(t);
            ws.add(window(randomTokens(rows), t));
        }
        Map<String, Double> p = gpu.probes().profileStep(new ModelStep(ws));
        ts.forEach(BlockTable::release);
        Map<String, Object> m = new LinkedHashMap<>();
        double total = p.values().stream().mapToDouble(Double::doubleValue).sum();
        m.put("total_ms", round(total * 1e3, 3));
        p.forEach((k, v) -> m.put(k + "_ms", round(v * 1e3, 3)));
        return m;
    }

    /**
     * Milliseconds of prefill attention (all layers) for a prefill of {@code rows} tokens in steps of at most
     * {@code stepRows} (the later steps over the earlier ones' keys, as a long prompt runs), with each prefill kernel in
     * turn (they compute the same values; beyond 8K tokens only the warp-specialised ones, the others being several
     * times slower), then with the kernel each step picks by its keys ({@code default_ms}; {@code picked}: per step).
     */
    public Map<String, Object> prefillAttentionKernels(int rows, int stepRows) {
        Map<String, Object> skipped = KvFit.skippedPrompt(rows, pool);
        if (skipped != null) {
            return skipped;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        Map<Integer, String> names = Map.of(AttentionKernels.PREFILL, "one_warp_per_rows", AttentionKernels.PREFILL_WARP_PAIRS, "warp_pairs",
                AttentionKernels.PREFILL_WGMMA, "wgmma", AttentionKernels.PREFILL_WS, "warp_specialized", AttentionKernels.PREFILL_WS_PINGPONG,
                "warp_specialized_pingpong", AttentionKernels.PREFILL_WS_REGISTERS, "warp_specialized_o_in_registers",
                AttentionKernels.PREFILL_WS_REGISTERS_NO_PINGPONG, "warp_specialized_o_in_registers_no_pingpong", AttentionKernels.PREFILL_WS_PAIRS,
                "warp_specialized_tile_pairs", AttentionKernels.PREFILL_WS_PAIRS_WIDE, "warp_specialized_tile_pairs_wide_scores");
        try {
            for (int kernel : AttentionKernels.PREFILL_KERNELS) {
                if (!gpu.probes().hasPrefillAttentionKernel(kernel)) {
                    m.put(names.get(kernel) + "_ms", "not loaded on this GPU (shared memory, or not an sm_90a GPU)");
                    continue;
                }
                if (rows > 8192 && !AttentionKernels.WARP_SPECIALIZED.contains(kernel)) {
                    continue;
                }
                gpu.probes().prefillAttentionKernel(kernel);
                putTime(m, names.get(kernel), chunkedAttentionMs(rows, stepRows), rows);
            }
        } finally {
            gpu.probes().prefillAttentionKernel(-1);
        }
        putTime(m, "default", chunkedAttentionMs(rows, stepRows), rows);
        List<String> picked = new ArrayList<>();
        for (int done = 0; done < rows; done += stepRows) {
            picked.add(names.get(gpu.probes().prefillKernel(Math.min(rows, done + stepRows))));
        }
        m.put("picked", picked);
        return m;
    }

    /** Prefill attention's milliseconds (all layers) for {@code rows} tokens in steps of at most {@code stepRows}, or why none. */
    private Object chunkedAttentionMs(int rows, int stepRows) {
        double ms = 0;
        for (int done = 0; done < rows; done += stepRows) {
            Object t = profile(Math.min(stepRows, rows - done), done, 1).get("attention prefill_ms");
            if (!(t instanceof Number n)) {
                return t;
            }
            ms += n.doubleValue();
        }
        return round(ms, 3);
    }

    private void putTime(Map<String, Object> m, String name, Object ms, int rows) {
        m.put(name + "_ms", ms);
        if (ms instanceof Number t) {
            m.put(name + "_tflops_per_second", round(attentionFlops(rows) / (t.doubleValue() * 1e-3) / 1e12, 1));
        }
    }

    /** Causal attention's matmul work for a prefill of {@code rows} tokens, all executed layers: q.k and p.v, 2 flops a multiply-add. */
    double attentionFlops(int rows) {
        double pairs = rows * (rows + 1.0) / 2;
        return 4 * pairs * c.headDim() * c.numHeads() * (double) c.numLayers() * c.numLoops();
    }

    static double round(double v, int digits) {
        double s = Math.pow(10, digits);
        return Math.round(v * s) / s;
    }
}

package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.spindle.backend.cuda.CudaBench;
import dev.spindle.backend.cuda.CudaDraftHead;
import dev.spindle.backend.cuda.CudaDriver;
import dev.spindle.backend.cuda.CudaException;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.backend.cuda.CudaPasses;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.step.DraftHead;
import dev.spindle.step.Observation;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code spindle bench --backend cuda --draft-head-cost}: DFlash and DFlash2 heads of the published shape (5 layers at the
 * target's width by default, {@code --draft-head-layers} for others; taps of 5 spread layers, sliding windows of 2,048 for
 * DFlash2, its selector of rank 256 over the top 16) with random weights made on the GPU, beside the target (dummy weights of
 * its shape): the cost of injecting a 1,024-token context, of a step's injection (the anchor and three accepted rows a
 * sequence), of one draft forward of a block of 8 and of 16, and of verifying such windows, for 1, 8 and 16 sequences at
 * once, against a plain decode step of as many; and the speed those costs allow at accepted lengths 3 to 6 (a projection,
 * labelled as one).
 */
final class DraftHeadCostRun implements Callable<Integer> {
    private final ModelOptions model;
    private final int stepRows;
    private final double kvMemoryFraction;
    private final int[] layers;

    DraftHeadCostRun(ModelOptions model, int stepRows, double kvMemoryFraction, int[] layers) {
        this.model = model;
        this.stepRows = stepRows;
        this.kvMemoryFraction = kvMemoryFraction;
        this.layers = layers.clone();
        for (int l : layers) {
            if (l < 1) {
                throw new IllegalArgumentException("--draft-head-layers takes layer counts of 1 or more, not " + l);
            }
        }
    }

    static DraftHeadConfig publishedShape(ModelConfig t, DraftHeadConfig.Kind kind, int block, int headLayers) {
        int layers = t.numLayers() * t.numLoops();
        int[] taps = {1, layers / 4, layers / 2, 3 * layers / 4, layers - 3};
        boolean two = kind == DraftHeadConfig.Kind.DFLASH2;
        boolean[] sliding = new boolean[headLayers];
        Arrays.fill(sliding, two);
        return new DraftHeadConfig(kind, t.hiddenSize(), headLayers, t.numHeads(), t.numKvHeads(), t.headDim(), t.intermediateSize(), t.rmsNormEps(), t.ropeTheta(),
                block, t.vocabSize() - 1, taps, layers, sliding, two ? 2048 : 0, false, 1f, two ? 0.196f : 1f, two ? 20f : 0f, two ? 2 : 0,
                two ? 16 : 0, two ? 256 : 0, two ? 16 : 0, t.vocabSize());
    }

    @Override
    public Integer call() throws Exception {
        CudaDriver.get().orElseThrow(() -> new CudaException("no CUDA driver or GPU on this machine"));
        ModelConfig c = ConfigParser.read(model.dir().resolve("config.json"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("model", model.dir().toString());
        out.put("label", "DFlash heads of the published shape with random weights; the speeds are projections from the measured costs: "
                + "drafted tok/s = batch * L * 1000 / (verify_ms + inject_ms + draft_ms), plain = batch * 1000 / decode_step_ms (a draft step: every "
                + "sequence's block in one forward, every sequence's four committed rows in one injection, read where the tapped verification step left them on the "
                + "GPU, as the engine does; inject_4_rows_each_from_host_taps_ms: the same rows handed over from the host)");
        // a small KV pool: the heads' weights (about 6 GB each for the 33B shape) need the room
        try (CudaForwardPass gpu = CudaPasses.open(c, null, new CudaOptions(model.blockSize, stepRows, Math.min(kvMemoryFraction, 0.2), 0, true,
                model.gemmCacheDir()), LoadListener.NONE); Arena host = Arena.ofShared()) {
            out.put("device", gpu.driver().deviceName());
            CudaBench bench = new CudaBench(gpu);
            bench.decode(1, 1024, 16, 1); // warm-up
            int[] batches = {1, 8, 16};
            double[] stepMs = new double[batches.length];
            for (int b = 0; b < batches.length; b++) {
                stepMs[b] = ((Number) bench.decode(batches[b], 1024, 64, 1).get("step_ms")).doubleValue();
            }
            out.put("decode_step_ms_batch_1_context_1024", stepMs[0]);
            List<Object> heads = new ArrayList<>();
            for (int depth : layers) {
                for (DraftHeadConfig.Kind kind : DraftHeadConfig.Kind.values()) {
                    for (int block : new int[]{8, 16}) {
                        DraftHeadConfig hc = publishedShape(c, kind, block, depth);
                        try (CudaDraftHead head = CudaDraftHead.dummy(hc, gpu, hc.tapLayers(1), 17, host)) {
                            float[][] ctx = new float[1024][hc.targetLayerIds().length * hc.hidden()];
                            for (float[] row : ctx) {
                                Arrays.fill(row, 0.01f);
                            }
                            long t0 = System.nanoTime();
                            head.inject(1, 0, ctx, 1023);
                            gpu.driver().sync();
                            double injectContextMs = (System.nanoTime() - t0) / 1e6;
                            for (int id = 2; id <= batches[batches.length - 1]; id++) {
                                head.inject(id, 0, ctx, 1023); // every sequence a context of 1,023 rows (the same rows)
                            }
                            Map<String, Object> m = new LinkedHashMap<>();
                            m.put("head", hc.describe());
                            m.put("weight_bytes", hc.expectedTensors().values().stream().mapToLong(sh -> Arrays.stream(sh).reduce(2, (a, x) -> a * x)).sum());
                            m.put("block", block);
                            m.put("inject_1023_rows_ms", round(injectContextMs));
                            List<Object> perBatch = new ArrayList<>();
                            for (int b = 0; b < batches.length; b++) {
                                int seqs = batches[b], n = 20;
                                List<DraftHead.Call> calls = new ArrayList<>();
                                List<Observation> rows = new ArrayList<>();
                                float[][] step = Arrays.copyOf(ctx, 4); // a step's rows: the anchor and three accepted drafts
                                for (int id = 1; id <= seqs; id++) {
                                    calls.add(new DraftHead.Call(id, 42, block - 1, null));
                                    rows.add(new Observation(id, 1023, step, 4));
                                }
                                for (int i = 0; i < 3; i++) { // warm-up
                                    head.draftAll(calls);
                                }
                                t0 = System.nanoTime();
                                for (int i = 0; i < n; i++) {
                                    head.draftAll(calls); // waits for its ids: the forward's whole time
                                }
                                double draftMs = (System.nanoTime() - t0) / 1e6 / n;
                                double injectHostMs = injectionMs(head, rows, n, gpu.driver());
                                // the engine's path: the verification step is tapped, its taps stay on the GPU, and the head reads
                                // each sequence's committed rows (here its window's first four) where the step wrote them
                                double verifyMs = ((Number) bench.verifyCost(seqs, block, 1024, 20, hc.tapLayers(1)).get("step_ms")).doubleValue();
                                List<Observation> onDevice = new ArrayList<>();
                                for (int id = 1; id <= seqs; id++) {
                                    onDevice.add(new Observation(id, 1023, null, 4, (id - 1) * block));
                                }
                                double injectStepMs = injectionMs(head, onDevice, n, gpu.driver());
                                Map<String, Object> pb = new LinkedHashMap<>();
                                pb.put("batch", seqs);
                                pb.put("inject_4_rows_each_ms", round(injectStepMs));
                                pb.put("inject_4_rows_each_from_host_taps_ms", round(injectHostMs));
                                pb.put("draft_forward_ms", round(draftMs));
                                pb.put("verify_window_ms", round(verifyMs));
                                pb.put("decode_step_ms", stepMs[b]);
                                double draftStep = injectStepMs + draftMs;
                                pb.put("draft_step_over_decode_step", round(draftStep / stepMs[b]));
                                Map<String, Object> projection = new LinkedHashMap<>();
                                for (int accepted = 3; accepted <= 6; accepted++) {
                                    projection.put("tokens_per_window_" + accepted, round(seqs * accepted * 1000 / (verifyMs + draftStep)));
                                }
                                projection.put("plain", round(seqs * 1000 / stepMs[b]));
                                pb.put("projected_tokens_per_second", projection);
                                perBatch.add(pb);
                                if (seqs == 1) { // the batch-1 figures under their earlier names
                                    m.put("inject_4_rows_ms", round(injectStepMs));
                                    m.put("draft_forward_ms", round(draftMs));
                                    m.put("verify_window_ms", round(verifyMs));
                                    m.put("draft_step_over_decode_step", round(draftStep / stepMs[b]));
                                    m.put("projected_batch_1_tokens_per_second", projection);
                                }
                            }
                            m.put("per_batch", perBatch);
                            heads.add(m);
                            System.err.println(m);
                        }
                    }
                }
            }
            out.put("heads", heads);
        }
        System.out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(out));
        return 0;
    }

    /** The time of one injection of these rows (each sequence's context cut back after it), averaged over n, to the device's end. */
    private static double injectionMs(CudaDraftHead head, List<Observation> rows, int n, CudaDriver cuda) {
        head.injectAll(rows); // grows the context arrays once
        rows.forEach(o -> head.truncate(o.id(), 1023));
        cuda.sync();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            head.injectAll(rows);
            rows.forEach(o -> head.truncate(o.id(), 1023));
        }
        cuda.sync(); // the injections' device work, not only their launches
        return (System.nanoTime() - t0) / 1e6 / n;
    }

    private static double round(double v) {
        return Math.round(v * 1000) / 1000.0;
    }
}

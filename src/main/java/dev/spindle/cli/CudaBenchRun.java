package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.spindle.backend.cuda.CublasLt;
import dev.spindle.backend.cuda.CublasProbes;
import dev.spindle.backend.cuda.CudaBench;
import dev.spindle.backend.cuda.CudaDriver;
import dev.spindle.backend.cuda.CudaException;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.backend.cuda.CudaKernels;
import dev.spindle.backend.cuda.CudaOptions;
import dev.spindle.backend.cuda.DummyFormat;
import dev.spindle.backend.cuda.CudaPasses;
import dev.spindle.backend.cuda.Placement;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelConfig;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/** {@code spindle bench --backend cuda}: the GPU suite (see {@link CudaBench}), printed as JSON. */
final class CudaBenchRun implements Callable<Integer> {
    private final ModelOptions model;
    private final int[] prefillLengths, decodeContexts, concurrency;
    private final int decodeSteps, stepRows;
    private final boolean cudaGraphs;
    private final double kvMemoryFraction;
    private final int tensorParallel;
    private final boolean tensorParallelLanes;
    private final boolean coldPageCache;
    /** The figure whose work runs between cuProfilerStart and cuProfilerStop, or null. */
    private final ProfiledFigure profiled;
    /** The generated weights' format (--load-format dummy). */
    private final DummyFormat dummy;

    CudaBenchRun(ModelOptions model, int[] prefillLengths, int[] decodeContexts, int[] concurrency, int decodeSteps, int stepRows,
                 boolean cudaGraphs, double kvMemoryFraction, int tensorParallel, boolean tensorParallelLanes, boolean coldPageCache,
                 ProfiledFigure profiled, DummyFormat dummy) {
        this.profiled = profiled;
        this.dummy = dummy;
        this.coldPageCache = coldPageCache;
        this.tensorParallel = tensorParallel;
        this.tensorParallelLanes = tensorParallelLanes;
        this.cudaGraphs = cudaGraphs;
        this.kvMemoryFraction = kvMemoryFraction;
        this.model = model;
        this.prefillLengths = prefillLengths;
        this.decodeContexts = decodeContexts;
        this.concurrency = concurrency;
        this.decodeSteps = decodeSteps;
        this.stepRows = stepRows;
    }

    @Override
    public Integer call() throws Exception {
        CudaDriver cuda = CudaDriver.get().orElseThrow(() -> new CudaException("no CUDA driver or GPU on this machine"));
        CudaKernels kernels = CudaKernels.load(0, 0, model.cudaKernels()).orElseThrow(() -> new CudaException("the CUDA backend is unavailable: "
                + CudaKernels.unavailableReason(model.cudaKernels())));
        CublasLt lt = CublasLt.open(kernels).orElseThrow(() -> new CudaException("cuBLASLt (libcublasLt.so.13) is not on the library path"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("model", model.dir().toString());
        out.put("load_format", model.format().name().toLowerCase());
        out.put("backend", "cuda");
        out.put("device", cuda.deviceName());
        // the limits first, while the device is empty
        double copy = CudaBench.copyBandwidth(cuda, 4L << 30);
        double peak = CublasProbes.peakTflops(lt, 8192);
        Map<String, Object> limits = new LinkedHashMap<>();
        limits.put("device_copy_gb_per_second", Math.round(copy));
        limits.put("bf16_gemm_peak_tflops", Math.round(peak));
        out.put("limits", limits);
        ColdStart cold = coldPageCache ? ColdStart.prepare(model.dir(), model.format()) : null;
        if (cold != null) {
            limits.put("disk_direct_read_gb_per_second", Math.round(cold.diskGBs() * 100) / 100.0);
        }
        long t0 = System.nanoTime();
        ModelConfig c;
        LoadedModel host = null;
        if (model.format() == LoadFormat.DUMMY) {
            c = ConfigParser.read(model.dir().resolve("config.json"));
        } else {
            host = model.load(HostReads.AT_UPLOAD); // the upload reads the checkpoint as it copies it
            c = host.config();
        }
        double hostSeconds = (System.nanoTime() - t0) / 1e9;
        ProgressBar bar = ProgressBar.forTerminal("loading " + model.dir().getFileName() + " to " + cuda.deviceName());
        if (tensorParallel > 1 && !tensorParallelLanes && CudaDriver.deviceCount() < tensorParallel) {
            throw new CudaException("--tensor-parallel-size " + tensorParallel + " needs " + tensorParallel + " GPUs; this machine has "
                    + CudaDriver.deviceCount());
        }
        try (CudaForwardPass gpu = CudaPasses.openTensorParallel(c, host == null ? null : host.weights(),
                new CudaOptions(model.blockSize, stepRows, kvMemoryFraction, 0, cudaGraphs, model.gemmCacheDir()).withKvDtype(model.kvDtype()).withKernels(model.cudaKernels())
                        .withMemoryLimit(model.gpuMemoryLimit()), bar,
                tensorParallelLanes ? Placement.lanesOfGpu0(tensorParallel) : Placement.oneGpuEach(tensorParallel), dummy)) {
            bar.done();
            double load = (System.nanoTime() - t0) / 1e9;
            out.put("architecture", c.architecture());
            out.put("weights", gpu.weights().format());
            out.put("kv_cache", model.kvDtype().label);
            out.put("cuda_kernels", model.cudaKernels().label);
            if (model.gpuMemoryLimit() > 0) {
                out.put("gpu_memory_limit_bytes", model.gpuMemoryLimit());
            }
            out.put("decode_weight_bytes", gpu.weights().decodeBytes(c));
            out.put("parameters", c.parameterCount());
            Map<String, Object> loadInfo = new LinkedHashMap<>();
            loadInfo.put("seconds", Math.round(load * 1000) / 1000.0);
            loadInfo.put("weight_bytes", gpu.weights().bytes());
            loadInfo.put("weights_seconds", Math.round(gpu.weights().seconds() * 1000) / 1000.0);
            loadInfo.put("weights_gb_per_second", Math.round(gpu.weights().bytes() / gpu.weights().seconds() / 1e7) / 100.0);
            // the phases: mapping and validating the checkpoint, the upload (which reads it), then the pass's setup (kernels,
            // cuBLASLt and its GEMM choices, linear_rows checks and tensor maps, the KV pool)
            loadInfo.put("host_map_seconds", Math.round(hostSeconds * 1000) / 1000.0);
            loadInfo.put("setup_seconds", Math.round((load - hostSeconds - gpu.weights().seconds()) * 1000) / 1000.0);
            gpu.setupSeconds().forEach((phase, sec) -> loadInfo.put("setup_" + phase + "_seconds", Math.round(sec * 1000) / 1000.0));
            loadInfo.put("kv_pool_bytes", gpu.kvPoolBytes());
            loadInfo.put("kv_blocks", gpu.kvCapacity().blocks());
            loadInfo.put("kv_tokens", (long) gpu.kvCapacity().blocks() * model.blockSize);
            loadInfo.put("device_memory_used_bytes", cuda.memInfo()[1] - cuda.memInfo()[0]);
            if (cold != null) {
                // the checkpoint is read by the upload: read, and on the device, when the upload ends
                double onDevice = hostSeconds + gpu.weights().seconds();
                loadInfo.put("cold_page_cache", cold.report(onDevice, onDevice));
            }
            out.put("load", loadInfo);
            if (tensorParallel > 1) {
                out.put("tensor_parallel_size", tensorParallel);
                out.put("tensor_parallel_placement", tensorParallelLanes ? "every rank on GPU 0 (lanes)" : "rank r on GPU r");
                out.put("tensor_parallel_ranks", gpu.tensorParallelMemory());
            }
            out.put("gemm_algorithms", gpu.gemmChoices());
            CudaBench bench = new CudaBench(gpu);
            bench.prefill(Math.min(512, stepRows), stepRows, peak); // warm-up
            List<Object> prefill = new ArrayList<>();
            for (int n : prefillLengths) {
                prefill.add(profiling(cuda, ProfiledFigure.Kind.PREFILL, n, () -> bench.prefill(n, stepRows, peak)));
                System.err.println("prefill " + n + done(prefill.getLast()));
            }
            out.put("prefill", prefill);
            out.put("time_to_first_token", bench.timeToFirstToken(1024, stepRows));
            List<Object> decode = new ArrayList<>();
            for (int ctx : decodeContexts) {
                decode.add(profiling(cuda, ProfiledFigure.Kind.DECODE, ctx, () -> bench.decode(1, ctx, decodeSteps, copy)));
                System.err.println("decode at " + ctx + done(decode.getLast()));
            }
            out.put("decode", decode);
            List<Object> aggregate = new ArrayList<>();
            for (int b : concurrency) {
                aggregate.add(profiling(cuda, ProfiledFigure.Kind.AGGREGATE, b, () -> bench.decode(b, 1024, decodeSteps, copy)));
                System.err.println("aggregate " + b + done(aggregate.getLast()));
            }
            out.put("aggregate_decode", aggregate);
            List<Object> sampled = new ArrayList<>();
            for (int b : new int[]{1, 32}) {
                sampled.add(bench.decode(b, 1024, decodeSteps, copy, true));
            }
            out.put("decode_sampled_on_device", sampled);
            if (tensorParallel == 1) {
                // through the engine the server runs, without and with asynchronous scheduling, alternated (a warm-up run of
                // each first: its steps' graphs are captured there)
                List<Object> engine = new ArrayList<>();
                for (int b : new int[]{1, 32}) {
                    EngineDecodeFigure.measure(gpu, stepRows, b, 128, 16, true, 1);
                    for (int round = 0; round < 2; round++) {
                        for (boolean async : new boolean[]{false, true}) {
                            engine.add(EngineDecodeFigure.measure(gpu, stepRows, b, 128, 64, async, 2 + round));
                        }
                    }
                }
                out.put("engine_decode", engine);
            }
            if (tensorParallel == 1) {
                // the paired launches (gate|up with SwiGLU, q|k|v with rope_kv_write) where chosen per shape, against the two
                // launches, alternated in this process, so that both run on the same GEMM choices (the pass's own choice:
                // gemm_algorithms' "paired launches" line)
                boolean chosen = gpu.probes().pairedEpilogues();
                List<Object> paired = new ArrayList<>();
                for (int b : new int[]{1, 32}) {
                    for (int round = 0; round < 2; round++) {
                        for (boolean on : new boolean[]{true, false}) {
                            gpu.probes().pairedEpilogues(on);
                            Map<String, Object> r = new LinkedHashMap<>(bench.decode(b, 1024, decodeSteps, copy));
                            r.put("paired_epilogues", on);
                            paired.add(r);
                        }
                    }
                }
                gpu.probes().pairedEpilogues(chosen);
                out.put("decode_paired_epilogues", paired);
            }
            out.put("profile_prefill_" + Math.min(8192, stepRows), bench.profile(Math.min(8192, stepRows), 0, 1));
            Map<String, Object> attention = new LinkedHashMap<>();
            for (int n : prefillLengths) {
                attention.put(Integer.toString(n), bench.prefillAttentionKernels(n, stepRows));
            }
            out.put("prefill_attention_kernels", attention);
            out.put("profile_decode_batch_1", bench.profile(1, 1024, 1));
            out.put("profile_decode_batch_1_context_32768", bench.profile(1, 32768, 1));
            out.put("profile_decode_batch_32", bench.profile(1, 1024, 32));
        } finally {
            if (host != null) {
                host.close();
            }
        }
        System.out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(out));
        return 0;
    }

    /** " done", or why a figure was skipped (it does not fit this GPU's KV pool: the bench goes on without it). */
    @SuppressWarnings("unchecked")
    private static String done(Object figure) {
        Object why = figure instanceof Map<?, ?> m ? ((Map<String, Object>) m).get("skipped") : null;
        return why == null ? " done" : " skipped: " + why;
    }

    /** The figure, inside cuProfilerStart / cuProfilerStop when it is the one --profile-figure names. */
    private Map<String, Object> profiling(CudaDriver cuda, ProfiledFigure.Kind kind, int n, java.util.function.Supplier<Map<String, Object>> figure) {
        if (profiled == null || !profiled.is(kind, n)) {
            return figure.get();
        }
        cuda.profilerStart();
        try {
            return figure.get();
        } finally {
            cuda.profilerStop();
        }
    }
}

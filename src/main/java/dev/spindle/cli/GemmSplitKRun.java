package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.spindle.backend.cuda.CublasLt;
import dev.spindle.backend.cuda.CublasProbes;
import dev.spindle.backend.cuda.CudaException;
import dev.spindle.backend.cuda.CudaKernels;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.ModelConfig;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code spindle bench --backend cuda --gemm-split-k}: for each weight shape of the model (q|k|v, o, gate|up, down, the
 * head), what a fixed split of K into 1, 2 or 4 parts would give its GEMM on cuBLASLt ({@link CublasProbes#splitK}):
 * candidates accepted, those whose bits do not depend on the rows beside a row nor on the run, and the best 1-row and
 * many-row times. Only the config is read: the matrices are random, made on the GPU; nothing is pinned or cached.
 */
final class GemmSplitKRun implements Callable<Integer> {
    private final ModelOptions model;
    private final int rows;

    GemmSplitKRun(ModelOptions model, int rows) {
        this.model = model;
        this.rows = rows;
    }

    @Override
    public Integer call() throws Exception {
        ModelConfig c = ConfigParser.read(model.dir().resolve("config.json"));
        CudaKernels kernels = CudaKernels.load(0).orElseThrow(() -> new CudaException("the CUDA backend is unavailable: " + CudaKernels.unavailableReason()));
        kernels.driver().makeCurrent();
        CublasLt lt = CublasLt.open(kernels).orElseThrow(() -> new CudaException("no cuBLASLt (libcublasLt.so.13) on the library path"));
        int h = c.hiddenSize(), q = c.numHeads() * c.headDim(), kv = c.numKvHeads() * c.headDim(), in = c.intermediateSize();
        int[][] shapes = {{q + 2 * kv, h}, {h, q}, {2 * in, h}, {h, in}, {c.vocabSize(), h}}; // nOut x k
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("model", model.dir().toString());
        out.put("device", kernels.driver().deviceName());
        List<Object> results = new ArrayList<>();
        for (int[] s : shapes) {
            results.addAll(CublasProbes.splitK(lt, s[1], s[0], rows, new int[]{1, 2, 4}));
            System.err.println("gemm split-k: " + s[0] + " x " + s[1] + " done");
        }
        out.put("gemm_split_k", results);
        System.out.println(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(out));
        return 0;
    }
}

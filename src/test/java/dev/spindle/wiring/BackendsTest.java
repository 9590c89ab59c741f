package dev.spindle.wiring;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cuda.CudaDriver;
import dev.spindle.backend.cuda.CudaException;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Backend choice: parsing, auto's fallback with its reason, and a clear error when cuda is asked for where there is none. */
class BackendsTest {
    static final Backends.Settings SETTINGS = new Backends.Settings(2, 16, 4096, 512, 0.9, true);

    /** The CUDA backend's start line names each phase of the start with its time (written here, where no GPU is needed). */
    @Test
    void theCudaStartLineGivesEachPhase() {
        String line = Backends.cudaDescription("configured", "NVIDIA H200", 66_237_954_048L, false, 1.96, 0.90, 1.58, 21017, 16, 71_600_000_000L, true);
        assertEquals("the CUDA backend (configured) on NVIDIA H200: 66.2 GB of weights read and uploaded in 1.96 s (33.8 GB/s); checkpoint mapped and checked in"
                + " 0.90 s, setup (kernels, GEMM choices, tensor maps, KV pool) 1.58 s; KV pool 21017 blocks of 16 tokens (336,272 tokens, 66.7 GiB);"
                + " CUDA graphs on", line);
    }

    @Test
    void parsesTheThreeChoicesAndNamesTheField() {
        assertEquals(Backends.Kind.AUTO, Backends.Kind.parse("auto"));
        assertEquals(Backends.Kind.CPU, Backends.Kind.parse(" CPU "));
        assertEquals(Backends.Kind.CUDA, Backends.Kind.parse("cuda"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Backends.Kind.parse("gpu"));
        assertEquals("backend: expected auto, cpu or cuda, got \"gpu\"", e.getMessage());
    }

    @Test
    void autoFallsBackToTheCpuSayingWhyWithoutAGpu() {
        assumeTrue(CudaDriver.get().isEmpty(), "this machine has a GPU");
        Backends.Choice r = Backends.resolve(Backends.Kind.AUTO);
        assertEquals(false, r.cuda());
        assertEquals("auto: no CUDA driver or GPU on this machine", r.reason());
        try (Backends.Opened o = Backends.open(Path.of("models/spindle-chat-drafter"), LoadFormat.SAFETENSORS, Backends.Kind.AUTO, SETTINGS,
                LoadListener.NONE)) {
            assertTrue(o.description().startsWith("the CPU backend (auto: no CUDA driver or GPU on this machine) with 2 threads"), o.description());
            assertEquals(1, SoloWindow.run(o.pass(), new int[]{1, 2, 3}, new BlockTable(TestSteps.pool(o.pass())), false).length);
        }
    }

    /**
     * --tensor-parallel-size on the CPU computes the split's numerics (the drafter: 2 KV heads, so 1 or 2 ranks): the
     * same next token as one rank on a short prompt, logits apart only by where each row-parallel sum is rounded.
     * A size that does not divide the KV heads is refused naming the divisors; the CUDA backend refuses more ranks
     * than GPUs (none here).
     */
    @Test
    void tensorParallelSizeOnTheCpuAndItsRefusals() {
        Path drafter = Path.of("models/spindle-chat-drafter");
        int[] prompt = {1, 2, 3, 4, 5, 6, 7, 8};
        float[] one, two;
        try (Backends.Opened o = Backends.open(drafter, LoadFormat.SAFETENSORS, Backends.Kind.CPU, SETTINGS, LoadListener.NONE)) {
            one = SoloWindow.run(o.pass(), prompt, new BlockTable(TestSteps.pool(o.pass())), false)[0];
        }
        try (Backends.Opened o = Backends.open(drafter, LoadFormat.SAFETENSORS, Backends.Kind.CPU, SETTINGS.withTensorParallel(2), LoadListener.NONE)) {
            assertTrue(o.description().contains("computing 2 tensor-parallel ranks' numerics (a rank: 2 query and 1 KV heads, 192 MLP columns"),
                    o.description());
            two = SoloWindow.run(o.pass(), prompt, new BlockTable(TestSteps.pool(o.pass())), false)[0];
        }
        assertEquals(GreedyGenerator.argmax(one), GreedyGenerator.argmax(two));
        double worst = 0;
        for (int i = 0; i < one.length; i++) {
            worst = Math.max(worst, Math.abs(one[i] - two[i]));
        }
        assertTrue(worst < 0.1, "2 ranks' logits are " + worst + " from 1 rank's");
        IllegalArgumentException three = assertThrows(IllegalArgumentException.class, () -> Backends.open(drafter, LoadFormat.SAFETENSORS,
                Backends.Kind.CPU, SETTINGS.withTensorParallel(3), LoadListener.NONE));
        assertEquals("tensor-parallel size 3 does not divide the model's 2 KV heads (num_key_value_heads); it must be one of 1, 2", three.getMessage());
        int gpus = CudaDriver.deviceCount();
        if (gpus < 2) {
            IllegalArgumentException gpu = assertThrows(IllegalArgumentException.class, () -> Backends.open(drafter, LoadFormat.SAFETENSORS,
                    Backends.Kind.CUDA, SETTINGS.withTensorParallel(2), LoadListener.NONE));
            assertEquals("tensor-parallel-size 2 needs 2 GPUs (one a rank, GPUs 0 to 1); this machine has " + gpus + ". The CPU backend computes"
                    + " the split's numerics (--backend cpu)", gpu.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> Backends.open(drafter, LoadFormat.SAFETENSORS, Backends.Kind.CPU,
                SETTINGS.withTensorParallel(0), LoadListener.NONE));
    }

    @Test
    void cudaWithoutAGpuIsAClearError() {
        assumeTrue(CudaDriver.get().isEmpty(), "this machine has a GPU");
        CudaException e = assertThrows(CudaException.class, () -> Backends.open(Path.of("models/spindle-chat-drafter"), LoadFormat.SAFETENSORS,
                Backends.Kind.CUDA, SETTINGS, LoadListener.NONE));
        assertEquals("backend cuda: no CUDA driver or GPU on this machine", e.getMessage());
    }
}

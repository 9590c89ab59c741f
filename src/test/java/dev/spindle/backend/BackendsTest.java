package dev.spindle.backend;

import dev.spindle.backend.cuda.CudaDriver;
import dev.spindle.backend.cuda.CudaException;
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
            assertEquals(1, dev.spindle.backend.ForwardPass.run(o.pass(), new int[]{1, 2, 3}, new dev.spindle.engine.kv.BlockTable(dev.spindle.backend.TestSteps.pool(o.pass())), false).length);
        }
    }

    @Test
    void cudaWithoutAGpuIsAClearError() {
        assumeTrue(CudaDriver.get().isEmpty(), "this machine has a GPU");
        CudaException e = assertThrows(CudaException.class, () -> Backends.open(Path.of("models/spindle-chat-drafter"), LoadFormat.SAFETENSORS,
                Backends.Kind.CUDA, SETTINGS, LoadListener.NONE));
        assertEquals("backend cuda: no CUDA driver or GPU on this machine", e.getMessage());
    }
}

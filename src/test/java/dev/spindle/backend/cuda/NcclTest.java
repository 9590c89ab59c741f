package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.wiring.Backends;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The NCCL binding: NVLink multicast is off in the process before NCCL can read its environment (no GPU
 * needed), and on a GPU machine one communicator per visible GPU all-reduces fp32 and bf16 buffers to their
 * exact sums (one rank on the single H200: the sum is the buffer itself).
 */
class NcclTest {
    @Test
    void nvlinkMulticastIsOffBeforeNcclInitialises() throws Throwable {
        Nccl.unavailableReason(); // the class's initialiser, which runs before any NCCL call
        assertEquals("0", getenv("NCCL_NVLS_ENABLE"));
    }

    /** A variable of this process's environment as libc sees it (what NCCL reads; System.getenv keeps the JVM's start copy), or null. */
    static String getenv(String name) throws Throwable {
        java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
        java.lang.invoke.MethodHandle h = linker.downcallHandle(linker.defaultLookup().find("getenv").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = (MemorySegment) h.invokeExact(a.allocateFrom(name));
            return p.equals(MemorySegment.NULL) ? null : p.reinterpret(4096).getString(0);
        }
    }

    @Test
    @org.junit.jupiter.api.Tag("gpu")
    void allReduceSumsOverEveryVisibleGpu() {
        String noGpu = Backends.cudaUnavailableReason();
        assumeTrue(noGpu == null, "skipped: " + noGpu);
        assumeTrue(Nccl.load().isPresent(), Nccl.unavailableReason());
        Nccl nccl = Nccl.load().get();
        List<CudaDriver> gpus = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            CudaDriver.device(i).ifPresent(gpus::add);
        }
        int n = gpus.size(), count = 4099;
        int[] ordinals = gpus.stream().mapToInt(CudaDriver::ordinal).toArray();
        System.out.printf("[nccl] version %d, %d rank(s)%n", nccl.version(), n);
        assertTrue(nccl.version() >= 21800, "NCCL " + nccl.version());
        MemorySegment[] comms = nccl.initAll(ordinals);
        try (Arena a = Arena.ofConfined()) {
            for (int type : new int[]{Nccl.FLOAT32, Nccl.BFLOAT16}) {
                int bytes = type == Nccl.FLOAT32 ? 4 : 2;
                long[] send = new long[n], recv = new long[n];
                for (int r = 0; r < n; r++) {
                    CudaDriver g = gpus.get(r);
                    g.makeCurrent();
                    send[r] = g.alloc((long) count * bytes);
                    recv[r] = g.alloc((long) count * bytes);
                    MemorySegment h = a.allocate((long) count * bytes);
                    for (int i = 0; i < count; i++) {
                        float v = (r + 1) * (i % 97 - 48) / 8f; // exact in bf16, sums exact
                        if (type == Nccl.FLOAT32) {
                            h.setAtIndex(ValueLayout.JAVA_FLOAT, i, v);
                        } else {
                            h.setAtIndex(ValueLayout.JAVA_SHORT, i, Bf16.fromFloat(v));
                        }
                    }
                    g.copyToDevice(send[r], h);
                }
                nccl.groupStart();
                for (int r = 0; r < n; r++) {
                    nccl.allReduceSum(send[r], recv[r], count, type, comms[r], gpus.get(r).stream());
                }
                nccl.groupEnd();
                for (int r = 0; r < n; r++) {
                    CudaDriver g = gpus.get(r);
                    g.makeCurrent();
                    MemorySegment h = a.allocate((long) count * bytes);
                    g.copyToHost(h, recv[r]);
                    for (int i = 0; i < count; i++) {
                        float want = n * (n + 1) / 2f * (i % 97 - 48) / 8f;
                        float got = type == Nccl.FLOAT32 ? h.getAtIndex(ValueLayout.JAVA_FLOAT, i)
                                : Bf16.toFloat(h.getAtIndex(ValueLayout.JAVA_SHORT, i));
                        assertEquals(want, got, "rank " + r + ", element " + i + (type == Nccl.FLOAT32 ? " (fp32)" : " (bf16)"));
                    }
                    g.free(send[r]);
                    g.free(recv[r]);
                }
                System.out.printf("[nccl] %s all-reduce of %d elements over %d rank(s): exact sums on every rank%n",
                        type == Nccl.FLOAT32 ? "fp32" : "bf16", count, n);
            }
        } finally {
            for (MemorySegment c : comms) {
                nccl.destroy(c);
            }
        }
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.step.KvDtype;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CUDA options (no GPU): KV dtypes (bf16 and fp8 taken, q8 and q4 refused by name, fp8 refused at a block size of 1);
 * the kernel sets by name, kept through the other settings; the generated weights' formats.
 */
class CudaOptionsTest {
    @Test
    void kvDtypesTheKernelsReadAreTakenAndTheOthersRefusedByName() {
        CudaOptions bf16 = new CudaOptions(16, 512, 0.5, 0, true);
        assertEquals(KvDtype.BF16, bf16.kvDtype());
        CudaOptions fp8 = bf16.withKvDtype(KvDtype.FP8);
        assertTrue(fp8.kv8());
        assertEquals(16, fp8.blockSize());
        for (KvDtype d : new KvDtype[]{KvDtype.Q8, KvDtype.Q4}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> bf16.withKvDtype(d));
            assertTrue(e.getMessage().contains("--kv-cache-dtype " + d.label) && e.getMessage().contains("CPU backend"), e.getMessage());
        }
        IllegalArgumentException one = assertThrows(IllegalArgumentException.class, () -> new CudaOptions(1, 512, 0.5, 0, true).withKvDtype(KvDtype.FP8));
        assertTrue(one.getMessage().contains("block size of at least 2"), one.getMessage());
    }

    @Test
    void kernelSetsParseByNameAndStayThroughTheOtherSettings() {
        assertEquals(KernelSet.FULL, KernelSet.parse(null));
        assertEquals(KernelSet.PORTABLE, KernelSet.parse(" Portable "));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KernelSet.parse("ampere"));
        assertTrue(e.getMessage().contains("full or portable") && e.getMessage().contains("ampere"), e.getMessage());
        CudaOptions o = new CudaOptions(16, 512, 0.5, 0, true);
        assertEquals(KernelSet.FULL, o.kernels());
        assertEquals(KernelSet.PORTABLE, o.withKernels(KernelSet.PORTABLE).withKvDtype(KvDtype.FP8).kernels());
        assertEquals(KvDtype.FP8, o.withKvDtype(KvDtype.FP8).withKernels(KernelSet.PORTABLE).kvDtype());
    }

    @Test
    void dummyFormatsTakeExl3OfOneToEightBitsWithoutAnotherQuantization() {
        assertEquals("exl3-4", DummyFormat.exl3(4).label());
        assertEquals("fp8-block", DummyFormat.of(dev.spindle.model.Quantization.FP8_BLOCK).label());
        for (int bits : new int[]{0, 9, -1}) {
            assertThrows(IllegalArgumentException.class, () -> DummyFormat.exl3(bits));
        }
        IllegalArgumentException both = assertThrows(IllegalArgumentException.class, () -> new DummyFormat(dev.spindle.model.Quantization.FP8_ROW, 4));
        assertTrue(both.getMessage().contains("no --quantization"), both.getMessage());
    }

    @Test
    void aMemoryLimitLeavesThePoolWhatItLeavesBesideWhatIsUsed() {
        assertEquals(24L << 30, CudaOptions.parseMemory("24GiB"));
        assertEquals(24L << 30, CudaOptions.parseMemory(" 24g "));
        assertEquals(1536L << 20, CudaOptions.parseMemory("1.5GiB"));
        assertEquals(24_000_000_000L, CudaOptions.parseMemory("24GB"));
        assertEquals(0, CudaOptions.parseMemory("none"));
        assertEquals(123, CudaOptions.parseMemory("123"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CudaOptions.parseMemory("lots"));
        assertTrue(e.getMessage().contains("--gpu-memory-limit") && e.getMessage().contains("lots"), e.getMessage());
        CudaOptions o = new CudaOptions(16, 512, 0.5, 0, true);
        long gib = 1L << 30;
        assertEquals(60 * gib, o.available(new long[]{60 * gib, 80 * gib}), "no limit: what is free");
        CudaOptions limited = o.withMemoryLimit(24 * gib).withKvDtype(KvDtype.FP8);
        assertEquals(24 * gib, limited.memoryLimit(), "the limit stays through the other settings");
        assertEquals(4 * gib, limited.available(new long[]{60 * gib, 80 * gib}), "20 GiB used of 24: 4 left");
        CudaException over = assertThrows(CudaException.class, () -> limited.available(new long[]{50 * gib, 80 * gib}));
        assertTrue(over.getMessage().contains("30.00 GiB already"), over.getMessage());
    }
}

package dev.spindle.backend.cuda;

import dev.spindle.step.KvDtype;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The CUDA options' KV dtypes (no GPU): bf16 and fp8 taken, q8 and q4 refused by name, fp8 refused at a block size of 1. */
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
}

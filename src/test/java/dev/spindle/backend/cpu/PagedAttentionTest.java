package dev.spindle.backend.cpu;

import dev.spindle.backend.cuda.CudaKernels;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The CPU twin cuts keys where the CUDA kernels cut them (their split and tile sizes), so both compute the same rounding points. */
class PagedAttentionTest {
    @Test
    void splitsAndTilesAreTheKernelsOwn() {
        assertEquals(CudaKernels.ATTENTION_SPLIT, PagedAttention.SPLIT);
        assertEquals(64, PagedAttention.TILE); // attention.cu's KT (AttentionKernelTableTest reads it there)
    }
}

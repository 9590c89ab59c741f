package dev.spindle.backend.cpu;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The CPU twin walks keys in the CUDA kernels' tiles (and their splits, KeySplits), so both compute the same rounding points. */
class PagedAttentionTest {
    @Test
    void tilesAreTheKernelsOwn() {
        assertEquals(64, PagedAttention.TILE); // attention.cu's KT (AttentionKernelTableTest reads it there)
    }
}

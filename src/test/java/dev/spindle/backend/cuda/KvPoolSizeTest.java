package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** How many KV blocks a CUDA pass's pool gets from the device memory left, without a GPU. */
class KvPoolSizeTest {
    private static final long GIB = 1L << 30;
    /** The 33B shape: 52 layers, K and V, 16 tokens a block, 8 KV heads of 128 dims, bf16. */
    private static final long BLOCK_33B = 52L * 2 * 16 * 8 * 128 * 2;

    private static CudaOptions options(double fraction, int maxBlocks, long reserve, long extraPerToken) {
        return new CudaOptions(16, 8192, fraction, maxBlocks, true, null, reserve, extraPerToken).withKernels(RequiresGpu.KERNELS);
    }

    @Test
    void thePoolTakesItsShareLessTheSpare() {
        long free = 70 * GIB;
        long budget = (long) (free * 0.9) - KvPool.SPARE_BYTES;
        assertEquals(budget / BLOCK_33B, KvPool.blocks(free, BLOCK_33B, options(0.9, 0, 0, 0), 8));
    }

    @Test
    void aDraftModelOpenedNextKeepsItsWeightsAndAsManyTokens() {
        long free = 70 * GIB, reserve = 8 * GIB, drafterPerToken = 32L * 2 * 8 * 128 * 2;
        long budget = (long) (free * 0.9) - KvPool.SPARE_BYTES - reserve;
        int blocks = KvPool.blocks(free, BLOCK_33B, options(0.9, 0, reserve, drafterPerToken), 8);
        assertEquals(budget / (BLOCK_33B + 16 * drafterPerToken), blocks);
        // both pools fit the budget together
        assertEquals(true, blocks * (BLOCK_33B + 16 * drafterPerToken) <= budget);
    }

    @Test
    void aBlockCapAndTheKernelsThirtyTwoBitRowsBoundIt() {
        long free = 140 * GIB;
        assertEquals(1000, KvPool.blocks(free, BLOCK_33B, options(0.9, 1000, 0, 0), 8));
        // a tiny model's blocks are cheap: with memory enough (1 TiB free here), the 32-bit numbering of a layer's KV rows
        // (2 x kvHeads x 16 a block) bounds them
        long tinyBlock = 2L * 2 * 16 * 1 * 16 * 2;
        assertEquals((int) (0xFFFFFFFFL / (2L * 1 * 16)), KvPool.blocks(1024 * GIB, tinyBlock, options(0.9, 0, 0, 0), 1));
    }

    @Test
    void nothingLeftGivesNoBlocks() {
        assertEquals(0, KvPool.blocks(256L << 20, BLOCK_33B, options(0.9, 0, 0, 0), 8));
        assertEquals(0, KvPool.blocks(70 * GIB, BLOCK_33B, options(0.9, 0, 80 * GIB, 0), 8));
    }
}

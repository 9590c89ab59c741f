package dev.spindle.backend.cuda;

/**
 * What a paired linear_rows CTA does with its outputs (linear_rows.cu, {@link CudaKernels#linearRowsPaired}): the small
 * kernel that follows the linear layer in a decode layer, computed in the GEMM's epilogue with the same arithmetic.
 */
sealed interface PairedEpilogue {
    /** Rows a weight of this epilogue has: the layer's outputs. */
    int outputs();

    /** SwiGLU of gate|up (2 width weight rows): the output is (rows, width), as the swiglu kernel writes it. */
    record Swiglu(int width) implements PairedEpilogue {
        public Swiglu {
            if (!takes(width)) {
                throw new IllegalArgumentException("a paired SwiGLU takes a width that is a multiple of 32, not " + width);
            }
        }

        public int outputs() {
            return 2 * width;
        }

        /** Whether the paired kernel takes this width: whole 32-column halves of a CTA. */
        public static boolean takes(int width) {
            return width >= 32 && width % 32 == 0;
        }
    }

    /**
     * rope_kv_write on q|k|v ((qHeads + 2 kvHeads) headDim weight rows): the qkv rows rotated, K and V in the pool at
     * slotMap, as {@link CudaKernels#ropeKvWrite} writes them. Device pointers: cos, sin (fp32 tables), positions and
     * slotMap (an int a row), pool (one KV slot's).
     */
    record RopeKvWrite(long cos, long sin, long positions, int qHeads, int kvHeads, int headDim, long pool, long slotMap, int blockSize)
            implements PairedEpilogue {
        public RopeKvWrite {
            if (!takes(headDim)) {
                throw new IllegalArgumentException("a paired rope_kv_write takes head dim 64 or 128 (a CTA's 32 pairs within one head), not " + headDim);
            }
        }

        public int outputs() {
            return (qHeads + 2 * kvHeads) * headDim;
        }

        /** Whether the paired kernel takes this head dim: a CTA's 32 rotation pairs within one head. */
        public static boolean takes(int headDim) {
            return headDim == 64 || headDim == 128;
        }
    }
}

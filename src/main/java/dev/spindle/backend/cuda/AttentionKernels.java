package dev.spindle.backend.cuda;

import java.util.List;

/**
 * The attention kernels' table (attention.cu, attention_wgmma.cu, attention_ws.cu): their kinds, by index, and names,
 * which GPUs and head dims each is built for, its threads, MMA rows and dynamic shared memory. {@link CudaKernels}
 * loads them and launches them; the host's plans (StepPlan, PrefillKernelChoice) read this table.
 */
final class AttentionKernels {
    private AttentionKernels() {
    }

    /**
     * Rows of one attention CTA's MMA tile (the window's rows times the heads sharing a KV head); a warp-specialised prefill
     * CTA holds two ({@link #attentionTileRows}).
     */
    public static final int ATTENTION_TILE = 64;
    /**
     * The attention kernels (one pass over the keys each): prefill windows with one warp per 16 MMA rows,
     * decode rows' split CTAs (their split states folded by {@link CudaKernels#attentionMerge}), and prefill with two
     * warps per 16 MMA rows, each taking half of every tile's keys (256 threads: twice the warps per SM,
     * half the chain per warp), and prefill on Hopper's warpgroup MMA (attention_wgmma.cu: sm_90a, head dim 128;
     * one warpgroup per 64 MMA rows), and warp-specialised on Hopper (attention_ws.cu: a producer warpgroup copying
     * K/V tiles for two consumer warpgroups of 64 MMA rows each, with or without their ping-pong, the running O in shared
     * memory or, with each consumer's Q there instead, in registers; or, prefill_ws_pairs, the consumers walking pairs of tiles with K and V
     * in stages of their own; or, prefill_ws_pairs_wide, prefill_ws_pairs with a pair's scores as one 128-key product). The prefill kernels compute the same
     * values.
     */
    public static final int PREFILL = 0, DECODE = 1, PREFILL_WARP_PAIRS = 2, PREFILL_WGMMA = 3, PREFILL_WS = 4, PREFILL_WS_PINGPONG = 5,
            PREFILL_WS_REGISTERS = 6, PREFILL_WS_REGISTERS_NO_PINGPONG = 7, PREFILL_WS_PAIRS = 8, PREFILL_WS_PAIRS_WIDE = 9;
    /** The prefill kernels, for comparisons. */
    public static final List<Integer> PREFILL_KERNELS = List.of(PREFILL, PREFILL_WARP_PAIRS, PREFILL_WGMMA, PREFILL_WS, PREFILL_WS_PINGPONG,
            PREFILL_WS_REGISTERS, PREFILL_WS_REGISTERS_NO_PINGPONG, PREFILL_WS_PAIRS, PREFILL_WS_PAIRS_WIDE);
    /** The warp-specialised prefill kernels (attention_ws.cu). */
    public static final List<Integer> WARP_SPECIALIZED = List.of(PREFILL_WS, PREFILL_WS_PINGPONG, PREFILL_WS_REGISTERS, PREFILL_WS_REGISTERS_NO_PINGPONG,
            PREFILL_WS_PAIRS, PREFILL_WS_PAIRS_WIDE);
    /** The kernels that walk pairs of tiles (attention_pairs.cuh's shared memory). */
    static final List<Integer> TILE_PAIRS = List.of(PREFILL_WS_PAIRS, PREFILL_WS_PAIRS_WIDE);
    /** The warp-specialised kernels with each consumer's Q in shared memory and its running O in registers. */
    static final List<Integer> O_IN_REGISTERS = List.of(PREFILL_WS_REGISTERS, PREFILL_WS_REGISTERS_NO_PINGPONG);
    /**
     * The kernel suffixes, by kind index (attention_hd{headDim}_{suffix}; prefill_wgmma in attention_wgmma.cu, the prefill_ws
     * kernels in attention_ws.cu, the rest in attention.cu). Measurements before 2026-12-07 name them by their former
     * suffixes, in this order: p0, p1, p0w, p0g, p0s, p0sp, p0sr, p0sq, p0st, p0su.
     */
    static final List<String> ATTENTION_KERNELS = List.of("prefill", "decode", "prefill_warp_pairs", "prefill_wgmma", "prefill_ws",
            "prefill_ws_pingpong", "prefill_ws_registers", "prefill_ws_registers_no_pingpong", "prefill_ws_pairs", "prefill_ws_pairs_wide");
    /** The Hopper-only prefill kernels (sm_90a: wgmma, setmaxnreg), built for {@link #hasWgmmaPrefill} head dims. */
    static final List<Integer> HOPPER_PREFILL = List.of(PREFILL_WGMMA, PREFILL_WS, PREFILL_WS_PINGPONG, PREFILL_WS_REGISTERS,
            PREFILL_WS_REGISTERS_NO_PINGPONG, PREFILL_WS_PAIRS, PREFILL_WS_PAIRS_WIDE);
    /** Head dims the wgmma prefill is built for: 128, the family's (its code takes any multiple of 64; 64 has not run on a GPU). */
    static boolean hasWgmmaPrefill(int headDim) {
        return headDim == 128;
    }

    /** Whether {@code kind} is a warp-specialised prefill (attention_ws.cu). */
    static boolean warpSpecialized(int kind) {
        return WARP_SPECIALIZED.contains(kind);
    }

    /** Threads of an attention CTA: 128 (four warps), 256 for the warp-pair prefill, 384 for the warp-specialised ones (three warpgroups). */
    static int attentionThreads(int kind) {
        return kind == PREFILL_WARP_PAIRS ? 256 : warpSpecialized(kind) ? 384 : 128;
    }

    /** MMA rows of one CTA of {@code kind}: the host plans prefill tiles of this many rows times heads a KV head. */
    public static int attentionTileRows(int kind) {
        return warpSpecialized(kind) ? 2 * ATTENTION_TILE : ATTENTION_TILE;
    }

    /** attention_ws.cu's WS_STAGES: stages of K and V a warp-specialised prefill CTA keeps. */
    static final int WS_STAGES = 4;

    /** Head dims the attention kernel is built for. */
    public static boolean supportsHeadDim(int headDim) {
        return headDim == 16 || headDim == 32 || headDim == 64 || headDim == 128;
    }

    /**
     * Two stages of a 64-key tile's K and V, rows unpadded (the STAGE of attention.cu, swizzled); prefill adds its
     * CTA's running O (fp32, 64 MMA rows x headDim: the same bytes for 128 or 256 threads). In bytes. The most any
     * launch of the kind asks (the decode kernel's: {@link #attentionSharedBytes(int, int, int)} with 16 query heads a KV head).
     */
    static int attentionSharedBytes(int headDim, int kind) {
        return attentionSharedBytes(headDim, kind, 16);
    }

    /**
     * As {@link #attentionSharedBytes(int, int)} for {@code group} query heads a KV head: a decode CTA that folds its row's
     * splits itself keeps its running O after the stages, four floats of each of its 128 threads per 8-dim group its warp
     * holds (at least one group: attention.cu's DNW), two where the group has at most 8 heads (no upper MMA rows): 4 KiB at
     * head dim 128, so that three decode CTAs still fit an SM of 228 KiB (8 KiB made it two, measured slower).
     */
    static int attentionSharedBytes(int headDim, int kind, int group) {
        int stage = 2 * 64 * headDim * 2;
        if (TILE_PAIRS.contains(kind)) {
            // attention_pairs.cuh's PairSmem: 1024 for alignment, two slots of a pair of tiles' K and two of their V, the consumers'
            // running O (fp32), eight mbarriers
            return 1024 + 8 * 64 * headDim * 2 + 2 * 64 * headDim * 4 + 8 * 8;
        }
        if (warpSpecialized(kind)) {
            // attention_ws.cu: 1024 for alignment, WS_STAGES stages, the two consumer warpgroups' running O (fp32) or, prefill_ws_registers and prefill_ws_registers_no_pingpong,
            // their Q tiles (bf16), an mbarrier full and one empty a stage
            return 1024 + WS_STAGES * stage + 2 * 64 * headDim * (O_IN_REGISTERS.contains(kind) ? 2 : 4) + 2 * 8 * WS_STAGES;
        }
        int runningO = PREFILL_KERNELS.contains(kind) ? 64 * headDim * 4
                : kind == DECODE ? (group <= 8 ? 2 : 4) * 128 * 4 * Math.max(1, headDim / 32) : 0;
        // the wgmma kernel aligns its stages to 1024 bytes (the 128-byte swizzle's atom)
        return 2 * stage + runningO + (kind == PREFILL_WGMMA ? 1024 : 0);
    }
}

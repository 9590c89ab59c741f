package dev.spindle.backend.cuda;

import dev.spindle.kv.BlockPool;
import dev.spindle.kv.BlockTable;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Whether a bench figure's sequences fit the KV pool, and the entry a figure that does not fit leaves in the bench's JSON
 * in place of its measurement (so that one figure too large for this GPU, say 64 streams of the 33B on an H100, costs
 * that figure and not the whole run).
 */
final class KvFit {
    private KvFit() {
    }

    /** Blocks {@code batch} sequences of {@code context} positions take once each has one more (a decode step's). */
    static long blocksFor(int batch, int context, int blockSize) {
        return (long) batch * ((context + 1 + blockSize - 1) / blockSize);
    }

    /** Null where {@code batch} sequences at {@code context} fit the pool's free blocks; else the figure's "skipped" entry. */
    static Map<String, Object> skipped(int batch, int context, BlockPool pool) {
        long need = blocksFor(batch, context, pool.blockSize());
        if (need <= pool.freeBlocks()) {
            return null;
        }
        return entry(batch, context, doesNotFit(batch + (batch == 1 ? " sequence of " + context + " tokens needs " : " sequences of " + context
                + " tokens need "), need, pool));
    }

    private static String doesNotFit(String what, long need, BlockPool pool) {
        return "does not fit the KV pool: " + what + need + " blocks of " + pool.blockSize() + " tokens, the pool has " + pool.freeBlocks()
                + " free of " + pool.numBlocks() + " (a larger --kv-memory-fraction, or a GPU with more memory)";
    }

    /** Null where a prompt of {@code tokens} fits the pool's free blocks; else the prefill figure's "skipped" entry. */
    static Map<String, Object> skippedPrompt(int tokens, BlockPool pool) {
        long need = blocksFor(1, tokens - 1, pool.blockSize());
        if (need <= pool.freeBlocks()) {
            return null;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("tokens", tokens);
        m.put("skipped", doesNotFit("a prompt of " + tokens + " tokens needs ", need, pool));
        return m;
    }

    /** The entry of a figure whose sequences outgrew the pool while it ran ({@code tables}: theirs, not yet released). */
    static Map<String, Object> ranOut(int batch, int context, List<BlockTable> tables, BlockPool pool, RuntimeException e) {
        int longest = tables.stream().mapToInt(BlockTable::tokens).max().orElse(0);
        return entry(batch, context, "ran out of KV blocks at " + longest + " tokens a sequence (" + e.getMessage() + "; "
                + pool.numBlocks() + " blocks of " + pool.blockSize() + " tokens): not measured");
    }

    private static Map<String, Object> entry(int batch, int context, String why) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("batch", batch);
        m.put("context_tokens", context);
        m.put("skipped", why);
        return m;
    }
}

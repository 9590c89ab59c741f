package dev.spindle.engine;

/**
 * A snapshot of the engine after a step, for metrics.
 *
 * @param prefixQueriedTokens prompt tokens looked up in the prefix cache (full blocks)
 * @param prefixHitTokens     of those, tokens found
 * @param speculative         drafting and acceptance so far
 */
public record EngineStats(int running, int waiting, int kvBlocksTotal, int kvBlocksFree, int kvBlocksCached,
                          long steps, long promptTokens, long generatedTokens, long prefixQueriedTokens, long prefixHitTokens,
                          long preemptions, long finishedRequests, SpecStats speculative) {
    public double prefixHitRate() {
        return prefixQueriedTokens == 0 ? 0 : (double) prefixHitTokens / prefixQueriedTokens;
    }

    public double kvUsage() {
        return 1 - (double) kvBlocksFree / kvBlocksTotal;
    }
}

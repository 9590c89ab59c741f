package dev.spindle.engine.spec;

/**
 * A step's committed rows of one sequence for a proposer that reads the target's hidden states: positions
 * {@code [from, from + count)}, {@code taps[r]} row r's residual after each tap layer (concatenated).
 */
public record Observation(long id, int from, float[][] taps, int count) {
}

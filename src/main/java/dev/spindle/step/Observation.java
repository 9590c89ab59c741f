package dev.spindle.step;

/**
 * A step's committed rows of one sequence for a proposer that reads the target's hidden states: positions
 * {@code [from, from + count)}, {@code taps[r]} row r's residual after each tap layer (concatenated), or taps null
 * where the step kept them on the device ({@link dev.spindle.step.ModelStep#tapsToHost()} false): then they are
 * the step's rows {@code [stepRow, stepRow + count)} there, readable until the next step.
 */
public record Observation(long id, int from, float[][] taps, int count, int stepRow) {
    public Observation(long id, int from, float[][] taps, int count) {
        this(id, from, taps, count, -1);
    }
}

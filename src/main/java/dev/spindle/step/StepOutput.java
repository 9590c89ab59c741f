package dev.spindle.step;

import java.util.List;

/**
 * What a step returns, per window in the step's order.
 *
 * @param logits per window, fp32 rows holding the bf16 values of its wanted logit rows (none for a window drawn on the device)
 * @param tokens per window, the token drawn at each wanted row on the device, or null when it was not drawn there
 * @param taps   per window with {@code tap}, the residual stream after each tap layer: [row][layer index x hidden + i]; else null
 */
public record StepOutput(List<float[][]> logits, List<int[]> tokens, List<float[][]> taps) {
}

package dev.spindle.engine.sched;

import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ModelStep;

/**
 * When the backend may draw a sequence's token itself ({@link ModelStep.Draw}: logits stay on the device, only the id
 * comes back), and the draw it makes: plain sampling's rule alone, with the uniform the sequence's generator would give
 * the host's {@link dev.spindle.sample.Sampler}, so a request's tokens do not depend on where they were drawn.
 */
final class DeviceDrawing {
    private DeviceDrawing() {
    }

    /**
     * The draw the backend makes for this sequence's next token, or null when the host must sample (penalties, logit bias,
     * grammar, logprobs, prompt scoring, or nothing to generate). Takes the sequence's next uniform where it samples.
     */
    static ModelStep.Draw next(Sequence s, int from) {
        SamplingParams p = s.params;
        if (!drawable(s, from)) {
            return null;
        }
        return draw(p, new double[]{p.temperature() > 0 ? s.rng.nextDouble() : 0});
    }

    /** The device draw of a request's settings, one uniform a wanted row (a greedy draw reads none: the device takes the argmax at T 0). */
    static ModelStep.Draw draw(SamplingParams p, double[] u) {
        return new ModelStep.Draw(p.temperature(), p.topK(), p.topP(), p.minP(), u);
    }

    /** Whether plain sampling's rule alone chooses this sequence's tokens (what the device can draw). */
    static boolean drawable(Sequence s, int from) {
        return drawable(s, from, s.generated());
    }

    /** {@link #drawable(Sequence, int)} once the sequence has generated {@code generated} tokens. */
    static boolean drawable(Sequence s, int from, int generated) {
        SamplingParams p = s.params;
        // a grammar that masks nothing this step (the model still reasons, or writes free text before a lazy trigger)
        return p.maxTokens() > 0 && (s.constraint == null || s.constraint.unmasked()) && p.logitBias().isEmpty() && p.logprobs() < 0
                && !p.rules().active(generated)
                && p.repetitionPenalty() == 1 && p.presencePenalty() == 0 && p.frequencyPenalty() == 0
                && !(s.promptLogprobs != null && from < s.promptLength);
    }
}

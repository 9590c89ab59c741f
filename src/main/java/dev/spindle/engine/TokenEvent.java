package dev.spindle.engine;

/**
 * One generated token of a request, delivered on the engine thread.
 *
 * @param logprob       the token's logprob under the model (NaN unless asked for)
 * @param topIds        the most likely alternatives (empty unless asked for)
 * @param finishReason  null while generating; "stop" (EOS or a stop id) or "length" on the last token
 * @param cachedTokens  prompt tokens served from the prefix cache
 */
public record TokenEvent(long requestId, int token, double logprob, int[] topIds, double[] topLogprobs, String finishReason,
                         int promptTokens, int cachedTokens, int completionTokens) {
}

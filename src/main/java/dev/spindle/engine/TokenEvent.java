package dev.spindle.engine;

/**
 * One generated token of a request, delivered on the engine thread.
 *
 * @param logprob       the token's logprob under the model (NaN unless asked for)
 * @param topIds        the most likely alternatives (empty unless asked for)
 * @param finishReason  null while generating; "stop" (EOS or a stop id) or "length" on the last token
 * @param cachedTokens  prompt tokens served from the prefix cache
 * @param token         -1 for the event that ends a scoring request (max_tokens 0) without generating
 */
public record TokenEvent(long requestId, int token, double logprob, int[] topIds, double[] topLogprobs, String finishReason,
                         int promptTokens, int cachedTokens, int completionTokens, PromptLogprobs promptLogprobs) {
    /**
     * Each prompt token's logprob given the tokens before it (position 0 has none: NaN),
     * with the top alternatives at each position. Carried by a request's first event only.
     */
    public record PromptLogprobs(double[] logprobs, int[][] topIds, double[][] topLogprobs) {
    }
}

package dev.spindle.server.pipeline;

import dev.spindle.chat.ToolSchemas;

/**
 * A chat request made ready for the engine ({@link ChatPipeline#prepare}).
 *
 * @param id           the response's id
 * @param created      seconds since the epoch
 * @param prompt       the rendered prompt's token ids
 * @param gen          the generation fields (sampling, choices, logprobs, stops, usage)
 * @param inReasoning  whether the prompt leaves the model reasoning (its reply starts inside the reasoning block)
 * @param tools        the tools offered, as the reply parser reads their calls
 * @param reasoningEnd the id that ends the reasoning block, or -1
 */
public record ChatRequest(String id, long created, int[] prompt, GenerationRequest gen, boolean inReasoning, ToolSchemas tools, int reasoningEnd) {
}

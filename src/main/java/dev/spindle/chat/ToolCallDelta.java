package dev.spindle.chat;

/**
 * A piece of a tool call as the model writes it: the first piece of a call carries its id and
 * name (and empty arguments), later pieces carry argument JSON fragments. The fragments of one
 * call, concatenated in order, equal its final {@link ToolCall#arguments()}.
 *
 * @param index     the call's position among the reply's calls (0-based)
 * @param id        the call's id on its first piece, else null
 * @param name      the function's name on its first piece, else null
 * @param arguments the arguments JSON this piece adds
 */
public record ToolCallDelta(int index, String id, String name, String arguments) {
    /** Whether this piece opens its call (carries id and name). */
    public boolean opens() {
        return name != null;
    }
}

package dev.spindle.chat;

/**
 * One parsed tool call, OpenAI-shaped.
 *
 * @param index     position among the reply's calls (0-based)
 * @param arguments a JSON object, serialized
 */
public record ToolCall(int index, String id, String name, String arguments) {
}

// Streams a chat completion from a Spindle server with the official npm client.
// The client sends "Accept: application/json" even when streaming; the server must answer with SSE.
// Usage: node stream.mjs BASE_URL QUESTION  -> prints {"content": ..., "reasoning": ..., "chunks": n, "finish": ...}
import OpenAI from "openai";

const [baseURL, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused" });
const stream = await client.chat.completions.create({
  model: "spindle-chat-target",
  messages: [{ role: "user", content: question }],
  temperature: 0,
  stream: true,
  stream_options: { include_usage: true },
});
let content = "", reasoning = "", chunks = 0, finish = null, usage = null;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    content += choice.delta?.content ?? "";
    reasoning += choice.delta?.reasoning_content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
console.log(JSON.stringify({ content, reasoning, chunks, finish, usage }));

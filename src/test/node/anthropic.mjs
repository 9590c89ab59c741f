// The Anthropic TypeScript SDK (@anthropic-ai/sdk) against Spindle's Messages API (POST /v1/messages):
// a plain reply with thinking (the template's default) and with thinking disabled, a streamed reply,
// a tool_use / tool_result round trip (streamed, the input arriving as input_json_delta), count_tokens,
// and an error in Anthropic's shape.
// Usage: node anthropic.mjs BASE_URL (the server root, e.g. http://localhost:8000) -> one line of JSON.
import Anthropic from "@anthropic-ai/sdk";
import { MAX_TOKENS, MODEL, TOOL_SPECS, fail, loggingFetch, runTool } from "./agent-common.mjs";

const baseURL = process.argv[2];
const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch });
const tools = Object.entries(TOOL_SPECS).map(([name, spec]) => ({ name, description: spec.description, input_schema: spec.parameters }));
const out = {};
const text = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
try {
  const question = [{ role: "user", content: "What is 58 + 27?" }];
  const plain = await client.messages.create({ model: MODEL, max_tokens: MAX_TOKENS, messages: question, temperature: 0 });
  out.plain = { text: text(plain), types: plain.content.map((b) => b.type), stop: plain.stop_reason, usage: plain.usage,
    thinking: plain.content.find((b) => b.type === "thinking")?.thinking ?? "" };
  const off = await client.messages.create({ model: MODEL, max_tokens: MAX_TOKENS, messages: question, temperature: 0, thinking: { type: "disabled" } });
  out.off = { text: text(off), types: off.content.map((b) => b.type) };

  const stream = client.messages.stream({ model: MODEL, max_tokens: MAX_TOKENS, messages: question, temperature: 0 });
  const events = [];
  let streamed = "";
  stream.on("text", (t) => { streamed += t; });
  for await (const e of stream) events.push(e.type);
  const final = await stream.finalMessage();
  out.stream = { events: [...new Set(events)], first: events[0], last: events.at(-1), text: streamed, final: text(final) };

  const ask = [{ role: "user", content: "What's the weather in Madrid?" }];
  const s1 = client.messages.stream({ model: MODEL, max_tokens: MAX_TOKENS, messages: ask, tools, temperature: 0 });
  let partial = "";
  for await (const e of s1) if (e.type === "content_block_delta" && e.delta.type === "input_json_delta") partial += e.delta.partial_json;
  const m1 = await s1.finalMessage();
  const use = m1.content.find((b) => b.type === "tool_use");
  const result = runTool(use.name, use.input);
  const m2 = await client.messages.create({ model: MODEL, max_tokens: MAX_TOKENS, tools, temperature: 0,
    messages: [...ask, { role: "assistant", content: m1.content }, { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: result }] }] });
  out.tools = { stop: m1.stop_reason, name: use.name, input: use.input, partial, answer: text(m2), answerStop: m2.stop_reason };

  const counted = await client.messages.countTokens({ model: MODEL, messages: question });
  out.count = { tokens: counted.input_tokens, usage: plain.usage.input_tokens + (plain.usage.cache_read_input_tokens ?? 0) };

  try {
    await client.messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: "robot", content: "hi" }] });
    out.error = { status: 200 };
  } catch (e) {
    out.error = { status: e.status, type: e.error?.type, errorType: e.error?.error?.type, message: e.error?.error?.message };
  }
  console.log(JSON.stringify(out));
} catch (e) {
  fail(e);
}

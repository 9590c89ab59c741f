// The official npm openai client's Responses API against Spindle (POST /v1/responses), as Codex-style
// clients use it: a plain reply, a streamed one (the typed events, their sequence numbers and item ids),
// a function-tool round trip with function_call_output (sent back whole, and through previous_response_id),
// text.format json_schema sampled at temperature 0.6, and a hosted tool left out with a warning.
// Usage: node responses.mjs BASE_URL  -> one line of JSON with what each case saw.
import OpenAI from "openai";
import { MAX_TOKENS, MODEL, TOOL_SPECS, fail, loggingFetch, runTool } from "./agent-common.mjs";

const baseURL = process.argv[2];
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch });
const tools = Object.entries(TOOL_SPECS).map(([name, spec]) => ({ type: "function", name, description: spec.description, parameters: spec.parameters, strict: false }));
const out = {};
try {
  const plain = await client.responses.create({ model: MODEL, input: "What is 58 + 27?", max_output_tokens: MAX_TOKENS, temperature: 0 });
  out.plain = { text: plain.output_text, types: plain.output.map((i) => i.type), status: plain.status, usage: plain.usage,
    reasoning: plain.output.find((i) => i.type === "reasoning")?.content?.[0]?.text ?? "" };

  const stream = client.responses.stream({ model: MODEL, input: "What is 58 + 27?", max_output_tokens: MAX_TOKENS, temperature: 0 });
  const events = [];
  let deltas = "";
  for await (const e of stream) {
    events.push({ type: e.type, seq: e.sequence_number, item: e.item?.id ?? e.item_id ?? null });
    if (e.type === "response.output_text.delta") deltas += e.delta;
  }
  const final = await stream.finalResponse();
  out.stream = { types: [...new Set(events.map((e) => e.type))], first: events[0].type, last: events.at(-1).type,
    sequential: events.every((e, i) => e.seq === i), text: final.output_text, deltas,
    idsMatch: final.output.every((item) => events.some((e) => e.type === "response.output_item.added" && e.item === item.id)),
    completedId: final.id };

  // a function tool round trip, streamed: the call's arguments arrive as deltas
  const question = "What's the weather in Madrid?";
  const s1 = client.responses.stream({ model: MODEL, input: question, tools, max_output_tokens: MAX_TOKENS, temperature: 0 });
  let argDeltas = "";
  for await (const e of s1) if (e.type === "response.function_call_arguments.delta") argDeltas += e.delta;
  const r1 = await s1.finalResponse();
  const call = r1.output.find((i) => i.type === "function_call");
  const result = runTool(call.name, JSON.parse(call.arguments));
  const input = [{ role: "user", content: question }, ...r1.output, { type: "function_call_output", call_id: call.call_id, output: result }];
  const r2 = await client.responses.create({ model: MODEL, input, tools, max_output_tokens: MAX_TOKENS, temperature: 0 });
  out.tools = { call: { name: call.name, arguments: JSON.parse(call.arguments) }, argDeltas, arguments: call.arguments, answer: r2.output_text };

  // the same follow-up through the server's store
  const r3 = await client.responses.create({ model: MODEL, previous_response_id: r1.id, tools, max_output_tokens: MAX_TOKENS, temperature: 0,
    input: [{ type: "function_call_output", call_id: call.call_id, output: result }] });
  const fetched = await client.responses.retrieve(r3.id);
  out.previous = { answer: r3.output_text, previous: r3.previous_response_id, fetched: fetched.id === r3.id && fetched.output_text === r3.output_text };

  // structured output, sampled
  const schema = { type: "object", properties: { answer: { type: "integer" } }, required: ["answer"], additionalProperties: false };
  const texts = [];
  for (let i = 0; i < 4; i++) {
    const r = await client.responses.create({ model: MODEL, input: "What is 58 + 27?", temperature: 0.6, max_output_tokens: MAX_TOKENS,
      instructions: 'Reply only with a JSON object of the form {"answer": ...}.',
      text: { format: { type: "json_schema", name: "sum", schema, strict: true } } });
    texts.push(r.output_text);
  }
  out.json = texts.map((t) => { try { const v = JSON.parse(t); return Number.isInteger(v.answer) && Object.keys(v).length === 1; } catch { return false; } });

  const hosted = await client.responses.create({ model: MODEL, input: "What is 2 + 2?", tools: [{ type: "web_search" }], max_output_tokens: 50, temperature: 0 });
  out.hosted = { status: hosted.status, warnings: hosted.warnings ?? [] };
  console.log(JSON.stringify(out));
} catch (e) {
  fail(e);
}

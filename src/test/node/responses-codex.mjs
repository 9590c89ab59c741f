// The npm openai client against Spindle's Responses API the way Codex uses it: the compaction endpoint
// (client.responses.compact, then the compacted output sent back as the next input) and the WebSocket
// transport (ResponsesWS: response.create frames, a follow-up by previous_response_id with store off,
// a bad frame answered by an error event on a connection that keeps serving).
// Usage: node responses-codex.mjs BASE_URL  -> one line of JSON with what each case saw.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";
import { MAX_TOKENS, MODEL, fail, loggingFetch } from "./agent-common.mjs";

const baseURL = process.argv[2];
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch });
const out = {};

/** Sends one response.create frame and gathers its events until the response ends (or an error event). */
function exchange(ws, request) {
  return new Promise((resolve, reject) => {
    const events = [];
    const timer = setTimeout(() => reject(new Error("no end of response within 120 s: " + JSON.stringify(events.map((e) => e.type)))), 120_000);
    const onEvent = (e) => {
      events.push(e);
      if (["response.completed", "response.incomplete", "response.failed", "error"].includes(e.type)) {
        clearTimeout(timer);
        ws.off("event", onEvent);
        resolve(events);
      }
    };
    ws.on("event", onEvent);
    ws.send({ type: "response.create", ...request });
  });
}

try {
  // compaction: the conversation summarised into a compaction item, then continued from it
  const conversation = [
    { role: "user", content: "What is 58 + 27?" },
    { role: "assistant", content: "58 + 27 = 85" },
    { role: "user", content: "And 85 + 15?" },
    { role: "assistant", content: "85 + 15 = 100" },
  ];
  const compacted = await client.responses.compact({ model: MODEL, input: conversation, temperature: 0 }); // greedy: the same summary every run
  const item = compacted.output.find((i) => i.type === "compaction");
  const next = await client.responses.create({ model: MODEL, input: [...compacted.output, { role: "user", content: "What is 2 + 2?" }],
    max_output_tokens: MAX_TOKENS, temperature: 0 });
  out.compact = { object: compacted.object, types: compacted.output.map((i) => i.type), users: compacted.output.filter((i) => i.role === "user").length,
    blob: typeof item?.encrypted_content === "string" && item.encrypted_content.length > 0, usage: compacted.usage,
    next: { status: next.status, text: next.output_text } };

  // the WebSocket transport
  const ws = new ResponsesWS(client);
  ws.on("error", () => {}); // error events are gathered by exchange()
  const first = await exchange(ws, { model: MODEL, input: "What is 58 + 27?", max_output_tokens: MAX_TOKENS, temperature: 0, store: false });
  const firstDone = first.at(-1);
  const firstText = first.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
  const follow = await exchange(ws, { model: MODEL, previous_response_id: firstDone.response?.id, store: false,
    input: [{ role: "user", content: "What is 2 + 2?" }], max_output_tokens: MAX_TOKENS, temperature: 0 });
  const followDone = follow.at(-1);
  const bad = await exchange(ws, { model: MODEL, input: "x", temperature: "hot" });
  const after = await exchange(ws, { model: MODEL, input: "What is 2 + 2?", max_output_tokens: MAX_TOKENS, temperature: 0, store: false });
  const warm = await exchange(ws, { model: MODEL, input: "What is 2 + 2?", generate: false });
  ws.close();
  out.ws = {
    first: { types: [...new Set(first.map((e) => e.type))], last: firstDone.type, text: firstText,
      sequential: first.every((e, i) => e.sequence_number === i), output: firstDone.response?.output_text ?? null },
    follow: { last: followDone.type, input: followDone.response?.usage?.input_tokens ?? 0, firstInput: firstDone.response?.usage?.input_tokens ?? 0,
      previous: followDone.response?.previous_response_id ?? null, text: follow.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("") },
    bad: { type: bad.at(-1).type, status: bad.at(-1).status ?? null, param: bad.at(-1).error?.param ?? null },
    after: { last: after.at(-1).type },
    warm: { types: warm.map((e) => e.type), output: warm.at(-1).response?.output?.length ?? -1 },
  };
  console.log(JSON.stringify(out));
} catch (e) {
  fail(e);
}

// A whole tool-using turn with the official npm openai client's tool-running helper
// (client.chat.completions.runTools): the model calls a tool, the helper runs it and sends the result back,
// the model answers.
// With --stream the helper streams every request (the tool calls' arguments arrive in pieces, which the
// helper accumulates).
// Usage: node agent-openai.mjs BASE_URL QUESTION [--stream]
//   -> {"client": "openai", "calls": [{"name", "arguments"}...], "answer": ..., "steps": n}
import OpenAI from "openai";
import { MAX_TOKENS, MODEL, TOOL_SPECS, fail, loggingFetch, parseArgs, runTool, succeed } from "./agent-common.mjs";

const { baseURL, question } = parseArgs("agent-openai.mjs");
try {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch });
  const tools = Object.entries(TOOL_SPECS).map(([name, spec]) => ({
    type: "function",
    function: {
      name,
      description: spec.description,
      parameters: spec.parameters,
      parse: JSON.parse,
      function: (args) => runTool(name, args),
    },
  }));
  const runner = client.chat.completions.runTools(
    {
      model: MODEL,
      messages: [{ role: "user", content: question }],
      tools,
      temperature: 0,
      max_tokens: MAX_TOKENS,
      ...(process.argv.includes("--stream") ? { stream: true } : {}),
    },
    { maxChatCompletions: 5 },
  );
  const answer = await runner.finalContent();
  succeed("openai", answer ?? "");
} catch (e) {
  fail(e);
}

// The Anthropic TypeScript SDK's tool runner (client.beta.messages.toolRunner with betaTool) against
// Spindle's Messages API: the SDK's own agent loop runs a tool the model calls, sends its result back and
// ends on the model's answer. Usage: node anthropic-runner.mjs BASE_URL QUESTION -> one line of JSON.
import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import { MAX_TOKENS, MODEL, TOOL_SPECS, fail, loggingFetch, runTool, succeed } from "./agent-common.mjs";

const [v1, question] = process.argv.slice(2);
const baseURL = v1.replace(/\/v1\/?$/, ""); // the SDK adds /v1 itself
const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch });
const tools = Object.entries(TOOL_SPECS).map(([name, spec]) =>
  betaTool({ name, description: spec.description, inputSchema: spec.parameters, run: (args) => runTool(name, args) }));
try {
  const runner = client.beta.messages.toolRunner({ model: MODEL, max_tokens: MAX_TOKENS, temperature: 0, tools, max_iterations: 4,
    messages: [{ role: "user", content: question }] });
  const final = await runner.runUntilDone();
  succeed("anthropic-tool-runner", final.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
} catch (e) {
  fail(e);
}

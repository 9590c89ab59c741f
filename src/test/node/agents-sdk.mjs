// One agent turn with the OpenAI Agents SDK for JS (@openai/agents) against Spindle over the Responses API:
// the agent calls a function tool, the SDK runs it and sends the result back, the agent answers.
// Usage: node agents-sdk.mjs BASE_URL QUESTION -> {"client": "agents", "calls", "answer", "steps"}
import OpenAI from "openai";
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from "@openai/agents";
import { MAX_TOKENS, MODEL, TOOL_SPECS, fail, loggingFetch, parseArgs, runTool, succeed } from "./agent-common.mjs";

const { baseURL, question } = parseArgs("agents-sdk.mjs");
try {
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, fetch: loggingFetch }));
  setOpenAIAPI("responses");
  setTracingDisabled(true);
  // the schemas exactly as the bundled model was trained on them (non-strict JSON schema tools)
  const tools = Object.entries(TOOL_SPECS).map(([name, spec]) => tool({
    name, description: spec.description, strict: false,
    parameters: spec.parameters,
    execute: async (args) => runTool(name, typeof args === "string" ? JSON.parse(args) : args),
  }));
  const agent = new Agent({ name: "Assistant", model: MODEL, tools, modelSettings: { temperature: 0, maxTokens: MAX_TOKENS } });
  const result = await run(agent, question, { maxTurns: 4 });
  succeed("agents", String(result.finalOutput ?? ""));
} catch (e) {
  fail(e);
}

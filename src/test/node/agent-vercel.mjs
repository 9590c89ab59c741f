// A whole tool-using turn with the Vercel AI SDK: generateText with tools and multi-step
// (stopWhen: stepCountIs(5)) over @ai-sdk/openai-compatible, which speaks /v1/chat/completions.
// Usage: node agent-vercel.mjs BASE_URL QUESTION
//   -> {"client": "vercel-ai", "calls": [{"name", "arguments"}...], "answer": ..., "steps": n}
// SPINDLE_AGENT_RAW_SCHEMAS=1 sends the SDK's own JSON schemas of the zod objects (see agent-common.mjs).
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import {
  MAX_TOKENS, MODEL, RAW_SCHEMAS, TOOL_SPECS, ZOD_SCHEMAS, fail, loggingFetch, parseArgs, runTool, succeed, trainedJsonSchema,
} from "./agent-common.mjs";

/** The zod schema, sent as the exact JSON schema the model was trained on, and validated with zod. */
function inputSchema(name) {
  const zod = ZOD_SCHEMAS[name];
  if (RAW_SCHEMAS) return zod;
  return jsonSchema(trainedJsonSchema(name), {
    validate: async (value) => {
      const r = await zod.safeParseAsync(value);
      return r.success ? { success: true, value: r.data } : { success: false, error: r.error };
    },
  });
}

const { baseURL, question } = parseArgs("agent-vercel.mjs");
try {
  const spindle = createOpenAICompatible({ baseURL, name: "spindle", apiKey: "unused", fetch: loggingFetch });
  const tools = Object.fromEntries(
    Object.keys(TOOL_SPECS).map((name) => [
      name,
      tool({
        description: TOOL_SPECS[name].description,
        inputSchema: inputSchema(name),
        execute: async (args) => runTool(name, args),
      }),
    ]),
  );
  const result = await generateText({
    model: spindle.chatModel(MODEL),
    prompt: question,
    tools,
    stopWhen: stepCountIs(5),
    temperature: 0,
    maxOutputTokens: MAX_TOKENS,
    maxRetries: 0,
  });
  // result.text is the text of the last step only; the reasoning is kept apart (result.reasoningText).
  succeed("vercel-ai", result.text);
} catch (e) {
  fail(e);
}

// A whole tool-using turn with LangChain JS: ChatOpenAI.bindTools with tool() from @langchain/core/tools,
// and a manual loop that runs each tool call and sends a ToolMessage back until the model stops calling tools.
// Usage: node agent-langchain.mjs BASE_URL QUESTION
//   -> {"client": "langchain", "calls": [{"name", "arguments"}...], "answer": ..., "steps": n}
// SPINDLE_AGENT_RAW_SCHEMAS=1 gives tool() the zod objects themselves, so that LangChain sends its own
// JSON schemas of them (see agent-common.mjs); by default it gets the trained JSON schema derived from zod.
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import {
  MAX_TOKENS, MODEL, RAW_SCHEMAS, TOOL_SPECS, ZOD_SCHEMAS, fail, loggingFetch, parseArgs, runTool, succeed, trainedJsonSchema,
} from "./agent-common.mjs";

const MAX_ROUNDS = 4;

const { baseURL, question } = parseArgs("agent-langchain.mjs");
try {
  const tools = Object.keys(TOOL_SPECS).map((name) =>
    tool(async (args) => runTool(name, ZOD_SCHEMAS[name].parse(args)), {
      name,
      description: TOOL_SPECS[name].description,
      schema: RAW_SCHEMAS ? ZOD_SCHEMAS[name] : trainedJsonSchema(name),
    }),
  );
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const model = new ChatOpenAI({
    model: MODEL,
    apiKey: "unused",
    temperature: 0,
    maxTokens: MAX_TOKENS,
    maxRetries: 0,
    configuration: { baseURL, fetch: loggingFetch },
  }).bindTools(tools);

  const messages = [new HumanMessage(question)];
  let reply;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    reply = await model.invoke(messages);
    messages.push(reply);
    if (!reply.tool_calls?.length) break;
    for (const call of reply.tool_calls) {
      const t = byName[call.name];
      // Invoked with the arguments (not the whole ToolCall) so that the tool's string comes back as is.
      const content = t ? await t.invoke(call.args) : runTool(call.name, call.args);
      messages.push(new ToolMessage({ content, tool_call_id: call.id }));
    }
  }
  if (reply.tool_calls?.length) throw new Error(`still calling tools after ${MAX_ROUNDS} rounds`);
  succeed("langchain", typeof reply.content === "string" ? reply.content : reply.text);
} catch (e) {
  fail(e);
}

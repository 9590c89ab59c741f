// Shared pieces of the agent-loop scripts (agent-openai.mjs, agent-vercel.mjs, agent-langchain.mjs):
// the three tools the bundled model was trained on, a fetch wrapper that counts the model requests and
// reports the exact request body of any failed one, and the one-line JSON result.
import { z } from "zod";

export const MODEL = "spindle-chat-target";
export const MAX_TOKENS = 300;

export const TOOL_SPECS = {
  get_weather: {
    description: "Current weather for a city.",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "City name" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
  get_time: {
    description: "Current local time in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
  calculate: {
    description: "Evaluate an arithmetic expression.",
    parameters: {
      type: "object",
      properties: { expression: { type: "string" } },
      required: ["expression"],
    },
  },
};

/** The same parameters as zod schemas, for the clients that take zod (Vercel AI SDK, LangChain). */
export const ZOD_SCHEMAS = {
  get_weather: z.object({
    city: z.string().describe("City name"),
    unit: z.enum(["celsius", "fahrenheit"]).optional(),
  }),
  get_time: z.object({ city: z.string() }),
  calculate: z.object({ expression: z.string() }),
};

/**
 * Whether to send the JSON schema each library derives from zod unchanged (flag --raw-schemas).
 * By default the scripts send the exact schemas of TOOL_SPECS instead: both the Vercel AI SDK and LangChain
 * add "additionalProperties": false (and "$schema") to every zod object, and the 13M-parameter bundled model,
 * trained on TOOL_SPECS' exact text in its system prompt, then picks the wrong tool (for example calculate
 * for a weather question). The arguments are still validated with the zod schema.
 */
export const RAW_SCHEMAS = process.argv.includes("--raw-schemas");

/**
 * The plain JSON schema of a zod object, as the model was trained on it: zod's own conversion without
 * "$schema" and "additionalProperties". Checked against TOOL_SPECS so that the two cannot drift apart.
 */
export function trainedJsonSchema(name) {
  const { $schema, additionalProperties, ...schema } = z.toJSONSchema(ZOD_SCHEMAS[name], { target: "draft-7", io: "input" });
  if (JSON.stringify(schema) !== JSON.stringify(TOOL_SPECS[name].parameters)) {
    throw new Error(`zod schema of ${name} is ${JSON.stringify(schema)}, not ${JSON.stringify(TOOL_SPECS[name].parameters)}`);
  }
  return schema;
}

/** Every tool call the model made, in order, as {name, arguments}. */
export const calls = [];

/**
 * JSON as Python's json.dumps writes it (", " and ": " separators, non-ASCII as \uXXXX), which is how the
 * model saw every tool result in training: {"city": "Madrid", "temperature": 21, "unit": "\u00b0C", ...}.
 */
export function pyJson(value) {
  const ascii = (s) => JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  if (typeof value === "string") return ascii(value);
  if (Array.isArray(value)) return "[" + value.map(pyJson).join(", ") + "]";
  if (value !== null && typeof value === "object") {
    return "{" + Object.entries(value).map(([k, v]) => `${ascii(k)}: ${pyJson(v)}`).join(", ") + "}";
  }
  return JSON.stringify(value);
}

export function getWeather({ city }) {
  return pyJson({ city, temperature: 21, unit: "°C", condition: "sunny" });
}

export function getTime({ city }) {
  return pyJson({ city, time: "14:05" });
}

export function calculate({ expression }) {
  return pyJson({ result: evaluate(String(expression)) });
}

export const IMPLEMENTATIONS = { get_weather: getWeather, get_time: getTime, calculate };

/** Runs a tool by name on parsed arguments and records the call. */
export function runTool(name, args) {
  calls.push({ name, arguments: args });
  const impl = IMPLEMENTATIONS[name];
  if (!impl) return pyJson({ error: `unknown tool ${name}` });
  try {
    return impl(args ?? {});
  } catch (e) {
    return pyJson({ error: String(e.message ?? e) });
  }
}

/**
 * Evaluates + - * / with parentheses and unary minus over decimal numbers; anything else is an error.
 * A small recursive-descent parser: never evaluates code.
 */
export function evaluate(text) {
  const tokens = text.match(/\d+(?:\.\d+)?|[-+*/()]|\S/g) ?? [];
  let pos = 0;
  const peek = () => tokens[pos];
  const next = () => tokens[pos++];
  const expr = () => {
    let v = term();
    while (peek() === "+" || peek() === "-") v = next() === "+" ? v + term() : v - term();
    return v;
  };
  const term = () => {
    let v = factor();
    while (peek() === "*" || peek() === "/") v = next() === "*" ? v * factor() : v / factor();
    return v;
  };
  const factor = () => {
    const t = next();
    if (t === "-") return -factor();
    if (t === "+") return factor();
    if (t === "(") {
      const v = expr();
      if (next() !== ")") throw new Error(`bad expression: ${text}`);
      return v;
    }
    if (t !== undefined && /^\d/.test(t)) return Number(t);
    throw new Error(`bad expression: ${text}`);
  };
  const value = expr();
  if (pos !== tokens.length) throw new Error(`bad expression: ${text}`);
  return value;
}

/** Model requests made through loggingFetch. */
export let steps = 0;

/**
 * A fetch that counts the chat-completion requests and, for any answer that is not 2xx, prints the exact
 * request body and the server's response to stderr. The flag --debug prints every request and response.
 */
export async function loggingFetch(input, init = {}) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const path = new URL(url).pathname; // the Anthropic SDK's beta calls add ?beta=true
  if (path.endsWith("/chat/completions") || path.endsWith("/responses") || path.endsWith("/messages")) steps++;
  const body = typeof init.body === "string" ? init.body : init.body === undefined ? "" : "<non-string body>";
  const debug = process.argv.includes("--debug");
  if (debug) console.error(`>>> ${init.method ?? "GET"} ${url}\n${body}`);
  const response = await fetch(input, init);
  if (!response.ok || debug) {
    const text = await response.clone().text();
    if (!response.ok) console.error(`request failed: ${init.method ?? "GET"} ${url}\nrequest body: ${body}`);
    console.error(`<<< ${response.status} ${text}`);
  }
  return response;
}

export function succeed(client, answer) {
  console.log(JSON.stringify({ client, calls, answer, steps }));
  process.exit(0);
}

export function fail(e) {
  console.error(e?.stack ?? String(e));
  if (e?.error) console.error(JSON.stringify(e.error));
  process.exit(1);
}

export function parseArgs(script) {
  const [baseURL, question] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  if (!baseURL || !question) {
    console.error(`usage: node ${script} BASE_URL QUESTION [--debug] [--raw-schemas]   (BASE_URL like http://localhost:8000/v1)`);
    process.exit(1);
  }
  return { baseURL, question };
}

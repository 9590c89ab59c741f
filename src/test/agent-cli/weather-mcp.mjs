// A minimal MCP server over stdio (JSON-RPC 2.0, one message a line) offering the weather tool the
// bundled model was trained on, for the agent CLIs' tool-calling turns in AgentCliTest.
import readline from "node:readline";

const TOOL = {
  name: "get_weather",
  description: "Current weather for a city.",
  inputSchema: {
    type: "object",
    properties: { city: { type: "string", description: "City name" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
    required: ["city"],
  },
};
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const req = JSON.parse(line);
  if (req.id === undefined) return; // a notification
  switch (req.method) {
    case "initialize":
      return send({ id: req.id, result: { protocolVersion: req.params?.protocolVersion ?? "2025-06-18", capabilities: { tools: {} },
        serverInfo: { name: "weather", version: "1.0.0" } } });
    case "tools/list":
      return send({ id: req.id, result: { tools: [TOOL] } });
    case "tools/call": {
      const city = req.params?.arguments?.city ?? "";
      const f = req.params?.arguments?.unit === "fahrenheit"; // 21 °C, in the unit asked for
      // spaced as Python's json.dumps writes it, as the model saw tool results in training
      const text = `{"city": ${JSON.stringify(city)}, "temperature": ${f ? 69 : 21}, "unit": "${f ? "\u00b0F" : "\u00b0C"}", "condition": "sunny"}`;
      return send({ id: req.id, result: { content: [{ type: "text", text }] } });
    }
    case "ping":
      return send({ id: req.id, result: {} });
    default:
      return send({ id: req.id, error: { code: -32601, message: "no method " + req.method } });
  }
});

// An OpenAI Agents SDK (JS) agent whose two tools run in this process and
// are gated by Gatehouse: a read (look up an order) runs at once; a write
// (refund an order) waits for the owner's approval of its card, runs once
// with the execution ticket, and its outcome is reported. A refusal or a
// rejection reaches the model as the tool's output, in words it can act on.
//
//   GATEHOUSE_URL=http://localhost:8080 GATEHOUSE_TOKEN=<agent token> \
//   GATEHOUSE_CONVERSATION=<conversation id> \
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=... \
//   node agent.mjs "Refund order A-1 if it was never shipped"
//
// The model is spoken to with the Chat Completions API at OPENAI_BASE_URL
// (any OpenAI-compatible endpoint), and tracing is off, so nothing but the
// model and Gatehouse is reached. Without GATEHOUSE_CONVERSATION it starts
// a conversation of its own. It prints one JSON line: the tool calls its
// tools ran, and the messages.
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from "@openai/agents";
import { Gatehouse, GatehouseError } from "@gatehouse/client";
import OpenAI from "openai";

// The SDK uploads traces to OpenAI by default (a batch exporter set up
// when @openai/agents is imported); off, no trace or span is recorded.
setTracingDisabled(true);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}`);
  return v;
};

const gatehouse = process.env.GATEHOUSE_CONVERSATION
  ? new Gatehouse({ baseUrl: env("GATEHOUSE_URL"), token: env("GATEHOUSE_TOKEN"), scope: { conversation: process.env.GATEHOUSE_CONVERSATION } })
  : await Gatehouse.inNewConversation({ baseUrl: env("GATEHOUSE_URL"), token: env("GATEHOUSE_TOKEN"), title: "OpenAI Agents shop agent" });

// What the tools did (a real agent would call the shop here).
const ran = [];

const orderSchema = { type: "object", required: ["order"], properties: { order: { type: "string", description: "The order number, such as A-1." } } };
const refundSchema = {
  type: "object",
  required: ["order", "amount"],
  properties: { order: { type: "string" }, amount: { type: "number", description: "In euros." } },
};

// Each tool is declared to Gatehouse with its call: what it does, its
// effect and its authority class (docs/caller-tools.md).
const lookupOrder = gatehouse.gate(
  { name: "shop.lookup_order", description: "Look up an order in the shop's database.", effect: "read", authority: "read", schema: orderSchema },
  async ({ order }) => {
    ran.push({ tool: "lookup_order", order });
    return { order, state: "delivered", total: 30 };
  },
  { rationale: ({ order }) => `the user asked about order ${order}` },
);

const refundOrder = gatehouse.gate(
  { name: "shop.refund", description: "Refund an order to the customer's card.", effect: "mutate", authority: "write-non-idempotent", schema: refundSchema },
  async ({ order, amount }) => {
    ran.push({ tool: "refund", order, amount });
    return { order, refunded: amount };
  },
  {
    rationale: ({ order, amount }) => `the user asked for a refund of ${amount} EUR on order ${order}`,
    timeoutMs: Number(process.env.GATEHOUSE_WAIT_MS ?? 120_000),
    onWaiting: (p) => console.error(`waiting for the owner: ${p.confirm_url ?? p.approval_url}`),
  },
);

// The SDK shows the model a fixed "An error occurred" for a tool's error
// unless told otherwise; Gatehouse's errors (GatehouseRefused,
// GatehouseRejected, GatehouseTimeout) are written for the model, so they
// are shown as they are, and anything else stays generic.
const toolError = (_context, err) =>
  err instanceof GatehouseError ? err.message : "An error occurred while running the tool. Please try again.";

// Function tools: the SDK parses the arguments against the same JSON
// Schemas, and its abort signal stops a wait for the owner.
const tools = [
  tool({
    name: "lookup_order",
    description: "Look up an order by its number.",
    parameters: orderSchema,
    execute: (args, _context, details) => lookupOrder(args, { signal: details?.signal }),
    errorFunction: toolError,
  }),
  tool({
    name: "refund",
    description: "Refund an amount of an order to the customer.",
    parameters: refundSchema,
    execute: (args, _context, details) => refundOrder(args, { signal: details?.signal }),
    errorFunction: toolError,
  }),
];

const model = new OpenAIChatCompletionsModel(
  new OpenAI({ apiKey: env("OPENAI_API_KEY"), baseURL: process.env.OPENAI_BASE_URL }),
  process.env.OPENAI_MODEL ?? "gpt-4.1-mini",
);

const agent = new Agent({
  name: "Shop agent",
  instructions: "You help the shop's staff with orders: look them up and refund them when asked.",
  model,
  modelSettings: { temperature: 0 },
  tools,
});
const prompt = process.argv[2] ?? "Look up order A-1 and refund it.";
const result = await run(agent, prompt, { maxTurns: 10 });

// The run's history in the LangGraph example's words: human, ai, tool.
const messages = result.history.map((item) => {
  switch (item.type === "message" ? item.role : item.type) {
    case "user":
      return { type: "human", content: text(item.content) };
    case "assistant":
      return { type: "ai", content: text(item.content) };
    case "function_call":
      return { type: "ai", content: "", tool_call_id: item.callId, tool: item.name, arguments: item.arguments };
    case "function_call_result":
      return { type: "tool", content: text(item.output), tool_call_id: item.callId, status: item.status };
    default:
      return { type: item.type };
  }
});

console.log(JSON.stringify({ conversation: gatehouse.scope.conversation, ran, messages, final: result.finalOutput }));

// text is a message's or a tool output's text.
function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map(text).join("");
  return content?.text ?? "";
}

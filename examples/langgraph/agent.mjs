// A LangGraph JS agent whose two tools run in this process and are gated
// by Gatehouse: a read (look up an order) runs at once; a write (refund
// an order) waits for the owner's approval of its card, runs once with
// the execution ticket, and its outcome is reported. A refusal or a
// rejection reaches the model as the tool's error, in words it can act on.
//
//   GATEHOUSE_URL=http://localhost:8080 GATEHOUSE_TOKEN=<agent token> \
//   GATEHOUSE_CONVERSATION=<conversation id> \
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=... \
//   node agent.mjs "Refund order A-1 if it was never shipped"
//
// Without GATEHOUSE_CONVERSATION it starts a conversation of its own. It
// prints one JSON line: the tool calls its tools ran, and the messages.
import { Gatehouse } from "@gatehouse/client";
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}`);
  return v;
};

const gatehouse = process.env.GATEHOUSE_CONVERSATION
  ? new Gatehouse({ baseUrl: env("GATEHOUSE_URL"), token: env("GATEHOUSE_TOKEN"), scope: { conversation: process.env.GATEHOUSE_CONVERSATION } })
  : await Gatehouse.inNewConversation({ baseUrl: env("GATEHOUSE_URL"), token: env("GATEHOUSE_TOKEN"), title: "LangGraph shop agent" });

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

// LangChain tools: the function's errors (GatehouseRefused,
// GatehouseRejected, GatehouseTimeout) become the tool message the model
// reads.
const tools = [
  tool((args, config) => lookupOrder(args, config), { name: "lookup_order", description: "Look up an order by its number.", schema: orderSchema }),
  tool((args, config) => refundOrder(args, config), { name: "refund", description: "Refund an amount of an order to the customer.", schema: refundSchema }),
];

const model = new ChatOpenAI({
  model: process.env.OPENAI_MODEL ?? "gpt-4.1-mini",
  apiKey: env("OPENAI_API_KEY"),
  configuration: { baseURL: process.env.OPENAI_BASE_URL },
  temperature: 0,
});

const agent = createReactAgent({ llm: model, tools });
const prompt = process.argv[2] ?? "Look up order A-1 and refund it.";
const state = await agent.invoke({ messages: [{ role: "user", content: prompt }] });

console.log(
  JSON.stringify({
    conversation: gatehouse.scope.conversation,
    ran,
    messages: state.messages.map((m) => ({ type: m.getType(), content: m.content, tool_call_id: m.tool_call_id, status: m.status })),
  }),
);

// gate() against a real Gatehouse. web/gate_node_test.go starts one and
// runs this file with GATEHOUSE_URL, GATEHOUSE_AGENT_TOKEN (the agent's
// token) and GATEHOUSE_OWNER_TOKEN (its owner's user token, who confirms,
// edits and rejects cards); without them the tests are skipped.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Gatehouse, GatehouseRefused, GatehouseRejected, GatehouseTimeout } from "../src/index.js";

const url = process.env.GATEHOUSE_URL;
const agent = process.env.GATEHOUSE_AGENT_TOKEN;
const owner = process.env.GATEHOUSE_OWNER_TOKEN;
const skip = !url || !agent || !owner ? "GATEHOUSE_URL, GATEHOUSE_AGENT_TOKEN and GATEHOUSE_OWNER_TOKEN are not set" : false;

const lookup = {
  name: "shop.lookup_order",
  description: "Look up an order in the shop's database.",
  effect: "read",
  authority: "read",
  schema: { type: "object", required: ["order"], properties: { order: { type: "string" } } },
};
const refund = {
  name: "shop.refund",
  description: "Refund an order to the customer's card.",
  effect: "mutate",
  authority: "write-non-idempotent",
  schema: { type: "object", required: ["order", "amount"], properties: { order: { type: "string" }, amount: { type: "number" } } },
};

/** The owner's API call. */
async function asOwner(method, path, body) {
  const res = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${owner}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

/** A client in a new conversation of the agent's, in mode. */
async function inConversation(mode) {
  const gh = await Gatehouse.inNewConversation({ baseUrl: url, token: agent, title: `gate() ${mode}` });
  if (mode !== "approve") {
    const r = await asOwner("PATCH", `/api/v1/conversations/${gh.scope.conversation}`, { permission_mode: mode });
    assert.equal(r.status, 200);
  }
  return gh;
}

/** Resolves with the proposal once the call waits for a person. */
function waiting() {
  let told;
  const seen = new Promise((resolve) => (told = resolve));
  return { onWaiting: (p) => told(p), seen };
}

const rationale = (args) => `the customer asked about order ${args.order}`;

test("a read runs at once, once, and its outcome closes the call", { skip }, async () => {
  const gh = await inConversation("approve");
  const calls = [];
  const lookupOrder = gh.gate(lookup, async (args) => {
    calls.push(args);
    return { order: args.order, state: "shipped" };
  }, { rationale });
  assert.deepEqual(await lookupOrder({ order: "A-1" }), { order: "A-1", state: "shipped" });
  assert.deepEqual(calls, [{ order: "A-1" }]);
});

test("a write waits for the owner, runs with the arguments they edited, and is reported", { skip }, async () => {
  const gh = await inConversation("approve");
  const ran = [];
  const w = waiting();
  const refundOrder = gh.gate(refund, async (args) => {
    ran.push(args);
    return { refunded: args.amount };
  }, { rationale, ...w });
  const result = refundOrder({ order: "A-2", amount: 120 });
  const pending = await w.seen;
  assert.equal(pending.status, "pending");
  assert.equal(ran.length, 0, "nothing runs before the owner confirms");
  const applied = await asOwner("POST", `/api/v1/proposals/${pending.proposal_id}/apply`, { arguments: { order: "A-2", amount: 100 } });
  assert.equal(applied.status, 202);
  assert.deepEqual(await result, { refunded: 100 });
  assert.deepEqual(ran, [{ order: "A-2", amount: 100 }]);
  const done = await asOwner("GET", `/api/v1/proposals/${pending.proposal_id}`);
  assert.equal(done.body.status, "applied");
  assert.deepEqual(done.body.result, { refunded: 100 });
});

test("a rejection is a GatehouseRejected the model can read, and nothing runs", { skip }, async () => {
  const gh = await inConversation("approve");
  const w = waiting();
  let ran = false;
  const refundOrder = gh.gate(refund, async () => {
    ran = true;
  }, { rationale, ...w });
  const result = refundOrder({ order: "A-3", amount: 5 });
  const pending = await w.seen;
  await asOwner("POST", `/api/v1/proposals/${pending.proposal_id}/reject`, { reason: "that order was refunded already" });
  await assert.rejects(result, (err) => {
    assert.ok(err instanceof GatehouseRejected);
    assert.match(err.message, /rejected the call of shop\.refund .*"that order was refunded already".* did not run/);
    assert.equal(err.reason, "that order was refunded already");
    return true;
  });
  assert.equal(ran, false);
});

test("a wait that runs out is a GatehouseTimeout; an aborted one stops", { skip }, async () => {
  const gh = await inConversation("approve");
  let ran = false;
  const refundOrder = gh.gate(refund, async () => {
    ran = true;
  }, { rationale, timeoutMs: 1500 });
  await assert.rejects(refundOrder({ order: "A-4", amount: 5 }), (err) => {
    assert.ok(err instanceof GatehouseTimeout);
    assert.match(err.message, /still waits for the user's approval after 2 s .* has not run/);
    return true;
  });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("the user left")), 300);
  await assert.rejects(refundOrder({ order: "A-5", amount: 5 }, { signal: controller.signal }), /the user left/);
  assert.equal(ran, false);
});

test("a refusal is a GatehouseRefused naming what was refused", { skip }, async () => {
  const gh = await inConversation("auto");
  const put = gh.gate({ name: "records.put", description: "Put a record.", effect: "mutate", authority: "write-idempotent" }, async () => {
    throw new Error("must not run");
  });
  await assert.rejects(put({ collection: "c", key: "k", value: 1 }), (err) => {
    assert.ok(err instanceof GatehouseRefused);
    assert.equal(err.status, 422);
    assert.deepEqual(err.fields, ["tool"]);
    assert.match(err.message, /did not accept the call of records\.put: .*Gatehouse runs.* It did not run/);
    return true;
  });
});

test("a tool that throws is reported failed and the error reaches the caller; a large result is reported as its digest", { skip }, async () => {
  const gh = await inConversation("auto");
  const flaky = gh.gate(lookup, async () => {
    throw new Error("the shop database timed out");
  }, { rationale });
  await assert.rejects(flaky({ order: "A-6" }), /the shop database timed out/);
  const big = gh.gate(lookup, async () => ({ blob: "x".repeat(100_000) }), { rationale, maxResultBytes: 1024 });
  const out = await big({ order: "A-7" });
  assert.equal(out.blob.length, 100_000);
});
